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
		s.Close()
	}
}

// TestStatusWriterPassesFlushAndHijackThrough: http.ResponseController
// reaches the writer underneath, through Flush, Hijack and Unwrap.
func TestStatusWriterPassesFlushAndHijackThrough(t *testing.T) {
	rec := httptest.NewRecorder()
	s := NewStatusWriter(rec)
	defer s.Close()
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

// TestStatusWriterUsedAfterCloseWritesNothing: a handler that keeps its
// writer past its return writes nothing through it, and Close returns the
// status written before.
func TestStatusWriterUsedAfterCloseWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	s := NewStatusWriter(rec)
	s.WriteHeader(http.StatusAccepted)
	if got := s.Close(); got != http.StatusAccepted {
		t.Errorf("Close() = %d, want 202", got)
	}
	s.WriteHeader(http.StatusTeapot)
	s.Header().Set("X-Late", "yes")
	if rec.Header().Get("X-Late") != "" {
		t.Error("a header field set after Close reached the response")
	}
	if s.Unwrap() != nil {
		t.Error("Unwrap after Close returns the response's writer")
	}
	if n, err := s.Write([]byte("late")); n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %d, %v; want 0, ErrClosed", n, err)
	}
	if err := http.NewResponseController(s).Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Hijack(); !errors.Is(err, ErrClosed) {
		t.Errorf("Hijack after Close: %v, want ErrClosed", err)
	}
	if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 || rec.Flushed || s.Status() != http.StatusAccepted {
		t.Errorf("after Close: status %d, body %q, flushed %v; want only the 202 written before", rec.Code, rec.Body, rec.Flushed)
	}
}

// TestStatusWriterNeverReused: every StatusWriter taken serves one
// response; a closed one is never handed out again, so that a writer kept
// past its handler cannot reach another request's response.
func TestStatusWriterNeverReused(t *testing.T) {
	seen := map[*StatusWriter]bool{}
	for range 3 * blockSize {
		s := NewStatusWriter(httptest.NewRecorder())
		if seen[s] {
			t.Fatal("a StatusWriter was handed out twice")
		}
		seen[s] = true
		if s.Status() != 0 || s.closed.Load() {
			t.Fatal("a new StatusWriter is not fresh")
		}
		s.Close()
	}
}
