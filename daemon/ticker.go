package daemon

import "time"

// periodic runs a function every period on a goroutine of its own until
// halted: the daemon's background passes over the workers (QoS events,
// thread confinement). The zero value is not running.
type periodic struct {
	stop, done chan struct{}
}

// start runs tick every period, and last (if not nil) once more when
// halted.
func (p *periodic) start(period time.Duration, tick, last func()) {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if last != nil {
					last()
				}
				return
			case <-t.C:
				tick()
			}
		}
	}(p.stop, p.done)
}

// halt stops the loop, if it runs, and waits for it to end.
func (p *periodic) halt() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
}
