package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// A NIC's link state, read every period: a change calls back once, a
// link down from the start too, and a reading that fails changes nothing.
func TestWatchLinks(t *testing.T) {
	seq := map[string][]any{
		"a": {true, true, false, false, errors.New("no"), true, true},
		"b": {false, false, true},
	}
	var mu sync.Mutex
	step := map[string]int{}
	link := func(p string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		s := seq[p]
		v := s[min(step[p], len(s)-1)]
		step[p]++
		if err, ok := v.(error); ok {
			return false, err
		}
		return v.(bool), nil
	}
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		watchLinks(ctx, []string{"a", "b"}, time.Millisecond, link, func(p string, up bool) {
			got = append(got, fmt.Sprintf("%s %v", p, up))
		})
		close(done)
	}()
	for {
		mu.Lock()
		n := min(step["a"], step["b"])
		mu.Unlock()
		if n > 10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	want := []string{"b false", "a false", "b true", "a true"}
	if !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
}
