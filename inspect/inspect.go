// Package inspect decodes pcap and pcapng files offline with the same
// classifier and counters as the dataplane: one JSON object per frame, or
// a summary an operator reads like a switch's RoCE counters.
package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"roce-fwd/pcapio"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
	"roce-fwd/rocestats"
)

// Options control decoding.
type Options struct {
	VerifyICRC bool
	TCMap      roce.TCMap
}

// Frame is the documented per-frame JSON object. Pointers are null when a
// field does not apply to the frame.
type Frame struct {
	Index     int     `json:"index"`
	RoCE      bool    `json:"roce"`
	IPVersion *int    `json:"ip_version"`
	Opcode    *int    `json:"opcode"`
	OpName    *string `json:"opcode_name,omitempty"`
	Transport *string `json:"transport"`
	DestQP    *uint32 `json:"dest_qp"`
	PSN       *uint32 `json:"psn"`
	AckReq    *bool   `json:"ack_req"`
	CNP       bool    `json:"cnp"`
	DSCP      *int    `json:"dscp"`
	ECN       *int    `json:"ecn"`
	PCP       *int    `json:"pcp"`
	VLAN      *int    `json:"vlan"`
	ICRC      *string `json:"icrc"`
	TC        int     `json:"tc"`
	Error     *string `json:"error"`
	PFC       *PFC    `json:"pfc,omitempty"`
	Pause     *Pause  `json:"pause,omitempty"`
}

// PFC is an 802.1Qbb frame's content.
type PFC struct {
	ClassEnable int       `json:"class_enable"`
	Quanta      [8]uint16 `json:"quanta"`
}

// Pause is an 802.3x PAUSE frame's content.
type Pause struct {
	Quanta uint16 `json:"quanta"`
}

func ptr[T any](v T) *T { return &v }

// Describe turns a classified frame into its JSON object.
func Describe(index int, frame []byte, r *roce.Result) Frame {
	// A frame whose ICRC is wrong is still RoCEv2 (Wireshark shows it as
	// such, and the counters count it so): "icrc" and "error" say the rest.
	f := Frame{Index: index, RoCE: r.RoCE && (r.Err == roce.ReasonNone || r.Err == roce.ErrBadICRC), TC: int(r.TC), CNP: r.CNP}
	if r.IPVersion != 0 {
		f.IPVersion = ptr(int(r.IPVersion))
		f.DSCP = ptr(int(r.DSCP))
		f.ECN = ptr(int(r.ECN))
	}
	if r.Tagged {
		f.PCP = ptr(int(r.PCP))
		f.VLAN = ptr(int(r.VID))
	}
	if r.RoCE {
		f.Opcode = ptr(int(r.Opcode))
		f.OpName = ptr(r.Opcode.String())
		f.Transport = ptr(r.Transport.String())
		f.DestQP = ptr(r.DestQP)
		f.PSN = ptr(r.PSN)
		f.AckReq = ptr(r.AckReq)
		if r.ICRC != roce.ICRCUnchecked {
			f.ICRC = ptr(r.ICRC.String())
		}
	}
	if r.Err != roce.ReasonNone {
		f.Error = ptr(r.Err.String())
	}
	if req, ok := roce.ParseMACControl(frame, r); ok {
		if r.MACCtl == roce.MACCtlPFC {
			f.PFC = &PFC{ClassEnable: int(req.ClassEnable), Quanta: req.Quanta}
		} else {
			f.Pause = &Pause{Quanta: req.Quanta[0]}
		}
	}
	return f
}

// Summary is what a file adds up to.
type Summary struct {
	File     string
	Counters rocestats.Counters
	Flows    []qpstats.Flow
	QPTable  qpstats.TableStats
	// First and Last are the earliest and latest frame times (unix ns),
	// so that a second pass can bin the capture (Timeline).
	First, Last int64
}

// Each calls fn for every frame of the capture at path, classified.
func Each(path string, opt Options, fn func(i int, frame []byte, r *roce.Result, tsNano int64) error) error {
	rd, err := pcapio.Open(path)
	if err != nil {
		return err
	}
	defer rd.Close()
	var r roce.Result
	for i := 0; ; i++ {
		data, ts, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %v", path, i, err)
		}
		roce.Classify(data, &opt.TCMap, opt.VerifyICRC, &r)
		if err := fn(i, data, &r, ts.UnixNano()); err != nil {
			return err
		}
	}
}

// WriteJSON writes one JSON object per frame (JSON Lines).
func WriteJSON(w io.Writer, path string, opt Options) error {
	enc := json.NewEncoder(w)
	return Each(path, opt, func(i int, frame []byte, r *roce.Result, _ int64) error {
		return enc.Encode(Describe(i, frame, r))
	})
}

// flowSlots is the size of the QP table a capture is counted in.
const flowSlots = 1 << 16

// Summarize counts a capture.
func Summarize(path string, opt Options) (*Summary, error) {
	s := &Summary{File: path}
	tab := qpstats.New(flowSlots, 0)
	err := Each(path, opt, func(i int, frame []byte, r *roce.Result, ts int64) error {
		if i == 0 || ts < s.First {
			s.First = ts
		}
		if i == 0 || ts > s.Last {
			s.Last = ts
		}
		s.Counters.Add(frame, r, len(frame))
		if r.RoCE && (r.Err == roce.ReasonNone || r.Err == roce.ErrBadICRC) {
			tab.Observe(frame, r, len(frame), ts)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	entries, st := tab.CopyTo(nil)
	s.Flows = qpstats.Merge(entries)
	s.QPTable = st
	return s, nil
}
