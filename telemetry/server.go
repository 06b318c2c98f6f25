package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves /metrics over HTTP.
type Server struct {
	ln   net.Listener
	http *http.Server
	done chan struct{}
	log  *slog.Logger
}

// Serve listens on addr (":0" picks a port, see Addr) and serves the
// Prometheus metrics of src on /metrics, with the Go runtime and process
// metrics, from a registry of its own. A listen error is returned at once.
// The server stops when ctx ends or on Close.
func Serve(ctx context.Context, addr string, src Source, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(src)); err != nil {
		return nil, err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", addr) // *net.OpError: names the address and the reason
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{log},
		Registry:          reg,
		EnableOpenMetrics: true,
	})))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "roce-fwd\n\n/metrics  Prometheus metrics\n")
	})
	s := &Server{
		ln:   ln,
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		done: make(chan struct{}),
		log:  log,
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("telemetry server", "addr", s.Addr(), "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	log.Info("serving Prometheus metrics", "url", "http://"+s.Addr()+"/metrics")
	return s, nil
}

// Addr is the address the server listens on, with the port it got.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, giving scrapes in flight a second to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	<-s.done
	return err
}

// slogPrinter is promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", fmt.Sprint(v...)) }
