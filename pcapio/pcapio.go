// Package pcapio reads and writes Ethernet captures (pcap and pcapng) with
// gopacket's pcapgo, for the offline decoder, the demo traffic and tests.
package pcapio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Reader yields the frames of a capture in order.
type Reader struct {
	f    *os.File
	next func() ([]byte, gopacket.CaptureInfo, error)
}

// Open opens a pcap or pcapng file of Ethernet frames.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	magic, err := br.Peek(4)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a capture file: %v", path, err)
	}
	r := &Reader{f: f}
	var link layers.LinkType
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		link, r.next = ng.LinkType(), ng.ReadPacketData
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: not a pcap or pcapng file: %v", path, err)
		}
		link, r.next = pr.LinkType(), pr.ReadPacketData
	}
	if link != layers.LinkTypeEthernet {
		f.Close()
		return nil, fmt.Errorf("%s: link type %v: only Ethernet captures are supported", path, link)
	}
	return r, nil
}

// Next returns the next frame and its timestamp, or io.EOF.
func (r *Reader) Next() ([]byte, time.Time, error) {
	d, ci, err := r.next()
	return d, ci.Timestamp, err
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// ReadFile returns every frame of a capture.
func ReadFile(path string) ([][]byte, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out [][]byte
	for i := 0; ; i++ {
		d, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: frame %d: %v", path, i, err)
		}
		out = append(out, d)
	}
}

// Write writes frames as a pcap, one microsecond apart.
func Write(w io.Writer, frames [][]byte) error {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return err
	}
	ts := time.Unix(1700000000, 0)
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(f), Length: len(f)}
		if err := pw.WritePacket(ci, f); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes frames to a new pcap file.
func WriteFile(path string, frames [][]byte) error {
	var buf bytes.Buffer
	if err := Write(&buf, frames); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
