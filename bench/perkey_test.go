package bench

import "testing"

// TestBytesPerKeySmall checks that every library keeps state per key, as
// BytesPerKey measures it: a positive heap growth over 20,000 keys. Over
// 2,000 keys a library that sizes its table ahead grows little, and the
// heap is the process's, so memory freed elsewhere at the same moment hid
// the growth (go-limiter measured -0.7 B/key on a loaded machine). With
// 20,000 keys it grows 120 B/key; each library also gets three tries.
func TestBytesPerKeySmall(t *testing.T) {
	for _, lib := range Libraries() {
		var pk PerKey
		for try := 0; try < 3 && pk.Bytes <= 0; try++ {
			var err error
			if pk, err = BytesPerKey(lib, 20_000); err != nil {
				t.Fatal(err)
			}
		}
		if pk.Bytes <= 0 {
			t.Errorf("%s: %.1f bytes per key", lib.Name, pk.Bytes)
		}
		t.Logf("%s: %.1f B/key at %d keys", lib.Name, pk.Bytes, pk.Keys)
	}
}

// TestTrackersKeyed checks that the limiter APIs used for bytes per key keep
// one bucket per key.
func TestTrackersKeyed(t *testing.T) {
	for _, lib := range Libraries() {
		take, _, closeFn := lib.Tracker(OnePerHour)
		if !take("a") || take("a") || !take("b") || take("b") {
			t.Errorf("%s: the limiter API does not keep one bucket per key", lib.Name)
		}
		closeFn()
	}
}
