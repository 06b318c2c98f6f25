package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"roce-fwd/capture"
	"roce-fwd/config"
	"roce-fwd/console"
	"roce-fwd/daemon"
	"roce-fwd/demotraffic"
	"roce-fwd/dpdk"
	"roce-fwd/hugepages"
	"roce-fwd/internal/gcfloor"
	"roce-fwd/pcidev"
	"roce-fwd/qpstats"
	"roce-fwd/telemetry"

	"golang.org/x/sys/unix"
)

// loadConfig reads --config, or builds the embedded default whose demo
// capture is written to a temporary directory (removed by cleanup).
func loadConfig(path string) (cfg *config.Config, cleanup func(), err error) {
	if path != "" {
		cfg, err = config.Load(path)
		return cfg, func() {}, err
	}
	dir, err := os.MkdirTemp("", "roce-fwd-demo-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		cleanup()
		return nil, nil, err
	}
	cfg, err = config.Default(pcap)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return cfg, cleanup, nil
}

func cmdRun(args []string, log *slog.Logger) int {
	fs := newFlagSet("run", "[--config FILE] [-i] [--duration D] [--stats-json FILE] [--stats-period D] [--cpu-profile FILE]")
	cfgPath := fs.String("config", "", "TOML config file (default: the built-in demo on virtual devices)")
	interactive := fs.Bool("i", false, "open the console on this terminal (quit stops roce-fwd)")
	duration := fs.Duration("duration", 0, "stop cleanly after this long (0: run until SIGINT/SIGTERM)")
	statsJSON := fs.String("stats-json", "", "write the final statistics as JSON to this file")
	period := fs.Duration("stats-period", 0, "print statistics this often while running (0: only at the end)")
	cpuProfile := fs.String("cpu-profile", "", "write a Go CPU profile of the whole run, worker lcores included, to this file (pprof; `make pgo` builds with it)")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	// What can be refused before EAL starts is refused now, not after the
	// run.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"duration", *duration}, {"stats-period", *period}} {
		if d.v < 0 {
			fmt.Fprintf(os.Stderr, "roce-fwd run: --%s %v: must not be negative (0: %s)\n", d.name, d.v,
				map[string]string{"duration": "run until SIGINT/SIGTERM", "stats-period": "statistics only at the end"}[d.name])
			return exitUsage
		}
	}
	if *statsJSON != "" {
		if err := writable(*statsJSON); err != nil {
			fmt.Fprintf(os.Stderr, "roce-fwd run: --stats-json %s: %v\n", *statsJSON, err)
			return exitUsage
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd run: --cpu-profile:", err)
			return exitUsage
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd run: --cpu-profile:", err)
			f.Close()
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	cfg, cleanup, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	defer cleanup()
	if err := cfg.CheckFiles(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	if err := capture.CheckConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	// A live daemon on the console socket: refused before EAL takes the
	// ports, not found after.
	if path := cfg.Console.Socket; path != "" {
		if err := console.CheckSocket(path); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd:", err)
			return 1
		}
	}
	log.Info("roce-fwd starting", "version", buildVersion(), "build", buildTarget(), "config", cfg.File, "mode", cfg.Pipeline.Mode)
	// Each collection stops the workers too: run fewer of them while the
	// heap is small (internal/gcfloor).
	if gcfloor.Set(gcfloor.DefaultFloor) {
		log.Info("Go collector paced with a floor", "floor_mib", gcfloor.DefaultFloor>>20)
	} else {
		log.Info("Go collector paced by the environment's GOGC/GOMEMLIMIT")
	}

	// Signals first: a SIGINT while EAL and the ports come up (seconds on
	// a big machine) stops roce-fwd cleanly once they are up.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := daemon.Start(cfg, daemon.Options{Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd:", err)
		return 1
	}
	fmt.Print(d.Plan.String())
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	sh := console.New(d)
	closeCtl, err := startControl(ctx, d, sh, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd:", err)
		d.Close()
		return 1
	}
	defer closeCtl()
	if *interactive {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := console.Interactive(sh, os.Stdin, os.Stdout, cfg.Console.History); err != nil {
				log.Error("console", "err", err)
			}
		}()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			<-done
			cancel()
		}()
		return runLoop(ctx, d, log, 0, *statsJSON, closeCtl)
	}
	return runLoop(ctx, d, log, *period, *statsJSON, closeCtl)
}

// startControl opens what lets an operator reach a running daemon: the
// console socket, SIGHUP for reload, Prometheus and DPDK telemetry, and
// tells systemd the daemon is ready. The function it returns closes
// them; it may be called more than once.
func startControl(ctx context.Context, d *daemon.Daemon, sh *console.Shell, cfg *config.Config, log *slog.Logger) (func(), error) {
	closers := []func(){sh.Close} // closed last: after the socket and SIGHUP
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		})
	}
	if path := cfg.Console.Socket; path != "" {
		srv, err := console.Listen(path, sh, log)
		if err != nil {
			// A daemon nobody can attach to is not started (as for a
			// telemetry address in use).
			closeAll()
			return nil, err
		}
		log.Info("console listening", "socket", srv.Path())
		closers = append(closers, func() { srv.Close() })
	}
	if addr := cfg.Telemetry.Listen; addr != "" {
		srv, err := telemetry.Serve(ctx, addr, d.Snapshot, log)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: telemetry.listen: %w", cfg.File, err)
		}
		closers = append(closers, func() { srv.Close() })
	}
	if cfg.Telemetry.DPDK {
		if err := telemetry.RegisterDPDK(d.Snapshot); err != nil {
			log.Warn("DPDK telemetry: /roce/* commands not registered", "err", err)
		} else if sock := dpdk.TelemetrySocket(); sock != "" {
			log.Info("DPDK telemetry", "socket", sock, "commands", strings.Join(telemetry.DPDKCommands(), " "))
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	stopHup := make(chan struct{})
	hupDone := make(chan struct{})
	go func() {
		defer close(hupDone)
		for {
			select {
			case <-stopHup:
				return
			case <-hup:
				changes, err := d.Reload()
				if err != nil {
					log.Error("SIGHUP: config not reloaded", "err", err)
					continue
				}
				log.Info("SIGHUP: config reloaded", "changes", len(changes))
			}
		}
	}()
	closers = append(closers, func() {
		signal.Stop(hup)
		close(stopHup)
		<-hupDone
	})
	// Under systemd (Type=notify): READY=1 now that the ports forward
	// and the operator can reach the daemon; STOPPING=1 first on close.
	closers = append(closers, d.NotifySystemd())
	return closeAll, nil
}

// runLoop forwards until ctx ends, printing stats every period, then
// closes the control surfaces (closeCtl), stops, prints and writes the
// final stats and shuts down.
func runLoop(ctx context.Context, d *daemon.Daemon, log *slog.Logger, period time.Duration, statsJSON string, closeCtl func()) int {
	var tick <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			d.Report().WriteText(os.Stdout)
		}
	}
	log.Info("stopping")
	// No console command or SIGHUP reload from here on: one could start
	// forwarding again under the final report, or reach the daemon
	// after Close and crash it (Pipe and Ports are nil then).
	closeCtl()
	d.StopForwarding()
	if st, ok := d.CaptureStatus(); ok && st.Running {
		d.StopCapture() // its file complete, and its counts final in the report
	}
	rep := d.Report()
	rep.WriteText(os.Stdout)
	rc := 0
	if statsJSON != "" {
		if err := writeJSONFile(statsJSON, rep); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd:", err)
			rc = 1
		}
	}
	if err := d.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd: shutdown:", err)
		rc = 1
	}
	return rc
}

func cmdConsole(args []string, _ *slog.Logger) int {
	fs := newFlagSet("console", "[--socket PATH] [--json] [COMMAND...]")
	socket := fs.String("socket", config.DefaultConsoleSocket, "the daemon's console socket ([console] socket)")
	jsonOut := fs.Bool("json", false, "ask show commands for JSON")
	history := fs.String("history", config.DefaultConsoleHistory, "history file of the interactive console (\"\" for none)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	cl, err := console.Dial(*socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd console:", err)
		return 1
	}
	defer cl.Close()
	if fs.NArg() == 0 {
		if err := console.Interactive(cl, os.Stdin, os.Stdout, *history); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd console:", err)
			return 1
		}
		return 0
	}
	out, err := cl.Exec(strings.Join(fs.Args(), " "), *jsonOut)
	fmt.Print(out)
	if err != nil && !errors.Is(err, console.ErrQuit) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// writable reports why path could not be written (created, or
// overwritten) now.
func writable(path string) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errors.New("is a directory")
		}
		return unix.Access(path, unix.W_OK)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	return nil
}

func writeJSONFile(path string, rep daemon.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func cmdValidate(args []string, _ *slog.Logger) int {
	fs := newFlagSet("validate", "--config FILE")
	cfgPath := fs.String("config", "", "TOML config file")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	if *cfgPath == "" {
		fmt.Fprintln(os.Stderr, "roce-fwd validate: --config FILE is required")
		return exitUsage
	}
	cfg, err := config.Load(*cfgPath)
	if err == nil {
		err = cfg.CheckFiles()
	}
	if err == nil {
		err = capture.CheckConfig(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	fmt.Printf("%s: ok: %d ports, %d forwards, mode %s, burst %d\n", cfg.File, len(cfg.Ports), len(cfg.Forward), cfg.Pipeline.Mode, cfg.Pipeline.Burst)
	return 0
}

func cmdHugepages(args []string, _ *slog.Logger) int {
	fs := newFlagSet("hugepages", "[--config FILE] [--page-size SIZE] [--reserve]")
	cfgPath := fs.String("config", "", "TOML config file (default: the built-in config)")
	pageSize := fs.String("page-size", "", "hugepage size to plan for: 2M or 1G (default: the largest that fits)")
	reserve := fs.Bool("reserve", false, "reserve the missing pages and mount hugetlbfs (root only)")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	cfg, cleanup, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	defer cleanup()
	var ps uint64
	if *pageSize != "" {
		if ps, err = hugepages.ParseSize(*pageSize); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd hugepages: --page-size:", err)
			return exitUsage
		}
	}
	st, err := hugepages.Read("/")
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd hugepages:", err)
		return 1
	}
	demands := daemon.Demands(cfg, "/")
	plan := hugepages.MakePlan(st, demands, ps)
	fmt.Print(plan.String())
	if len(demands) > 0 && demands[0].TableBytes > 0 {
		fmt.Printf("each socket's need includes the worker lcores' QP tables: %.1f MiB (qp_table = %d slots of %d bytes per worker, and a copy of each for show roce qp)\n",
			float64(demands[0].TableBytes)/(1<<20), cfg.RoCE.QPTable, qpstats.SlotBytes)
	}
	if daemon.HasMemoryArg(cfg.EAL.Args) {
		fmt.Printf("note: %s sets the memory in [eal] args (%s); run uses those, and this plan only when they are removed\n",
			cfg.File, strings.Join(cfg.EAL.Args, " "))
	}
	if *reserve {
		if err := hugepages.Reserve("/", plan); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd hugepages:", err)
			return 1
		}
		st, _ = hugepages.Read("/")
		fmt.Println("\nafter reserving:")
		fmt.Print(hugepages.MakePlan(st, daemon.Demands(cfg, "/"), ps).String())
	}
	return 0
}

func cmdPorts(args []string, _ *slog.Logger) int {
	fs := newFlagSet("ports", "")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	devs, err := pcidev.List("/")
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd ports:", err)
		return 1
	}
	if len(devs) == 0 {
		fmt.Println("no network PCI devices found (virtual devices such as net_pcap or net_af_packet need none)")
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PCI ADDRESS\tVENDOR:DEVICE\tMODEL\tDRIVER\tNETDEV\tNUMA\tDPDK")
	for _, d := range devs {
		status := "no PMD"
		if d.DPDKCapable {
			status = "ready"
			if err := d.CheckDPDK(); err != nil {
				status = "needs rebind"
			}
		}
		netdev := "-"
		if len(d.Netdevs) > 0 {
			netdev = fmt.Sprint(d.Netdevs)
		}
		drv := d.Driver
		if drv == "" {
			drv = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%04x:%04x\t%s %s\t%s\t%s\t%d\t%s (%s)\n", d.Addr, d.Vendor, d.DeviceID, d.VendorName, d.Model, drv, netdev, d.NUMANode, status, kindOr(d.Kind))
	}
	tw.Flush()
	for _, d := range devs {
		if d.DPDKCapable {
			if err := d.CheckDPDK(); err != nil {
				fmt.Printf("\n%s: %v\n", d.Addr, err)
			}
		}
	}
	return 0
}

func kindOr(k string) string {
	if k == "" {
		return "-"
	}
	return k
}

func cmdVersion(args []string, _ *slog.Logger) int {
	fs := newFlagSet("version", "")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	fmt.Printf("roce-fwd %s\n%s\nbuilt with %s, QP table bucket scans: %s\n", buildVersion(), dpdk.Version(), buildTarget(), qpstats.BucketScan)
	return 0
}

// genPcapArgs is gen-pcap's usage; scripts/bench.sh relies on it.
const genPcapArgs = "[--qps N] [--mix demo|control|mtu1024|mtu4096] [--ipv6] [--frames N] [--seed S] [--flows FILE] FILE"

// cmdGenPcap writes the demo capture, or with --qps or a workload --mix a
// many-QP benchmark workload (demotraffic.Workload).
func cmdGenPcap(args []string, _ *slog.Logger) int {
	fs := newFlagSet("gen-pcap", genPcapArgs)
	qps := fs.Int("qps", 1, fmt.Sprintf("active QPs `N`, 1 to %d; implies --mix control", demotraffic.MaxQPs))
	mix := fs.String("mix", "demo", "demo (the built-in capture), control, mtu1024 or mtu4096; control with --qps")
	ipv6 := fs.Bool("ipv6", false, "IPv6 instead of IPv4 (workloads)")
	frames := fs.Int("frames", 0, fmt.Sprintf("total frames `N`, QPs to %d (default: 8 per QP up to 32768, or 8192 for the mtu mixes, in whole rounds)", demotraffic.MaxFrames))
	seed := fs.Uint64("seed", 1, "random seed `S` (workloads): the same arguments and seed give the same file")
	flowsPath := fs.String("flows", "", "also write the capture's distinct 5-tuples to `FILE`, one \"SRC DST SPORT DPORT PROTO\" a line")
	path, rc := parseGenPcapArgs(fs, args)
	if rc >= 0 {
		return rc
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "roce-fwd gen-pcap: "+format+"\n", a...)
		fmt.Fprintf(os.Stderr, "usage: roce-fwd gen-pcap %s\n", genPcapArgs)
		return exitUsage
	}
	if !set["mix"] && set["qps"] {
		*mix = "control"
	}
	if *mix == "demo" {
		if set["qps"] {
			return usageErr("--qps needs a workload mix (--mix control, mtu1024 or mtu4096): the demo capture has fixed flows")
		}
		for _, name := range []string{"ipv6", "frames", "seed"} {
			if set[name] {
				return usageErr("--%s applies to workloads: give --qps N or --mix control, mtu1024 or mtu4096", name)
			}
		}
		if err := demotraffic.WriteFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd gen-pcap:", err)
			return 1
		}
		if *flowsPath != "" {
			if err := writeFlowList(*flowsPath, demotraffic.FlowsOf(demotraffic.Frames())); err != nil {
				fmt.Fprintln(os.Stderr, "roce-fwd gen-pcap:", err)
				return 1
			}
		}
		fmt.Printf("%s: %d frames\n", path, len(demotraffic.Frames()))
		return 0
	}
	m, err := demotraffic.ParseMix(*mix)
	if err != nil {
		return usageErr("--mix %q: want demo, %s", *mix, strings.Join(demotraffic.MixNames, ", "))
	}
	if set["frames"] && *frames <= 0 {
		return usageErr("--frames %d: want %d to %d", *frames, *qps, demotraffic.MaxFrames)
	}
	w := demotraffic.Workload{Mix: m, QPs: *qps, IPv6: *ipv6, Frames: *frames, Seed: *seed}
	if err := w.Validate(); err != nil {
		return usageErr("--%v", err) // the message starts with the field's flag name
	}
	sum, err := w.WriteFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd gen-pcap:", err)
		return 1
	}
	if *flowsPath != "" {
		if err := writeFlowList(*flowsPath, sum.Flows); err != nil {
			fmt.Fprintln(os.Stderr, "roce-fwd gen-pcap:", err)
			return 1
		}
	}
	fmt.Printf("%s: %d frames, %d QPs, %d flows, %d bytes avg frame\n", path, sum.Frames, sum.QPs, len(sum.Flows),
		(sum.Bytes+int64(sum.Frames)/2)/int64(sum.Frames))
	return 0
}

// parseGenPcapArgs parses gen-pcap's flags, which may come before or after
// FILE, and returns FILE; the int is as parseFlags's.
func parseGenPcapArgs(fs *flag.FlagSet, args []string) (string, int) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", 0
			}
			return "", exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintf(fs.Output(), "roce-fwd gen-pcap: want one output FILE, got %d\n", len(files))
		fs.Usage()
		return "", exitUsage
	}
	return files[0], -1
}

func writeFlowList(path string, flows []demotraffic.FiveTuple) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = demotraffic.WriteFlows(f, flows)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
