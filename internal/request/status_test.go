package request

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStatusWriterRecordsTheStatusWritten: the first final status written
// is recorded (an informational 1xx is not final), a body or a flush
// without one records 200 as net/http sends it, and no write at all leaves
// 0 (unknown).
func TestStatusWriterRecordsTheStatusWritten(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int
	}{
		{"nothing", func(http.ResponseWriter) {}, 0},
		{"a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }, http.StatusBadGateway},
		{"two statuses", func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout); w.WriteHeader(http.StatusOK) }, http.StatusGatewayTimeout},
		{"1xx, then a status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusEarlyHints); w.WriteHeader(http.StatusCreated) }, http.StatusCreated},
		{"a body", func(w http.ResponseWriter) { w.Write([]byte("hi")) }, http.StatusOK},
		{"a flush", func(w http.ResponseWriter) { http.NewResponseController(w).Flush() }, http.StatusOK},
		{"a body, then a status", func(w http.ResponseWriter) { w.Write([]byte("hi")); w.WriteHeader(http.StatusTeapot) }, http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		s := NewStatusWriter(rec)
		c.write(s)
		if got := s.Status(); got != c.want {
			t.Errorf("%s: Status() = %d, want %d", c.name, got, c.want)
		}
		s.Free()
	}
}

// TestStatusWriterPassesFlushAndHijackThrough: http.ResponseController
// reaches the writer underneath, through Flush, Hijack and Unwrap.
func TestStatusWriterPassesFlushAndHijackThrough(t *testing.T) {
	rec := httptest.NewRecorder()
	s := NewStatusWriter(rec)
	defer s.Free()
	if err := http.NewResponseController(s).Flush(); err != nil || !rec.Flushed {
		t.Errorf("Flush: %v, flushed %v; want it to reach the recorder", err, rec.Flushed)
	}
	// The recorder cannot hijack: the controller must say so, not pretend.
	if _, _, err := http.NewResponseController(s).Hijack(); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("Hijack on a writer that cannot: %v, want http.ErrNotSupported", err)
	}
	if s.Unwrap() != rec {
		t.Error("Unwrap does not return the writer underneath")
	}
}

// TestFreedStatusWriterStartsAfresh: a writer given back and taken again
// records nothing of its previous request, and wraps the new writer.
func TestFreedStatusWriterStartsAfresh(t *testing.T) {
	first := httptest.NewRecorder()
	s := NewStatusWriter(first)
	s.WriteHeader(http.StatusServiceUnavailable)
	s.Free()
	if s.ResponseWriter != nil {
		t.Fatal("a freed writer still holds its request's writer")
	}
	second := httptest.NewRecorder()
	s = NewStatusWriter(second)
	defer s.Free()
	if s.Status() != 0 || s.Unwrap() != second {
		t.Errorf("a writer taken again: status %d, wraps the new writer: %v", s.Status(), s.Unwrap() == second)
	}
	s.WriteHeader(http.StatusOK)
	if first.Code != http.StatusServiceUnavailable || second.Code != http.StatusOK {
		t.Errorf("statuses written %d and %d, want 503 to the first writer and 200 to the second", first.Code, second.Code)
	}
}
