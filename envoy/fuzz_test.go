package envoy

import "testing"

// Any bytes parse and compile to rules or to an error, without a panic.
func FuzzParseAndCompile(f *testing.F) {
	for _, ex := range examples {
		f.Add([]byte(ex.yaml))
	}
	f.Add([]byte("domain: &a d\ndescriptors: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile("fuzz.yaml", data)
		if err != nil {
			return
		}
		if _, err := Compile(file); err != nil && len(err.Error()) == 0 {
			t.Fatal("an error without a message")
		}
	})
}
