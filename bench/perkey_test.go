package bench

import "testing"

func TestBytesPerKeySmall(t *testing.T) {
	for _, lib := range Libraries() {
		pk, err := BytesPerKey(lib, 2000)
		if err != nil {
			t.Fatal(err)
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
