package cluster

import (
	"fmt"
	"testing"
	"time"
)

// The kubelet of a control plane upgraded in place hashed the static
// Pods anew and replaced them (a vendor's in-place run, session 29): the
// old apiserver's log ends as the new one's begins, 3.8 s apart in its
// audit log - too short a silence to show it went down; a crash on the
// port in between is a container of its own.
func TestHandovers(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 23, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const (
		old     = "/var/log/pods/kube-system_kube-apiserver-cp_aaa/kube-apiserver/0.log"
		crashed = "/var/log/pods/kube-system_kube-apiserver-cp_bbb/kube-apiserver/0.log"
		next    = "/var/log/pods/kube-system_kube-apiserver-cp_bbb/kube-apiserver/1.log"
	)
	var lines []LogLine
	for _, l := range []struct {
		src string
		at  float64
	}{{old, 0}, {old, 30}, {crashed, 57}, {old, 59.8}, {crashed, 57.5}, {next, 61}, {next, 90}} {
		kept := fmt.Sprintf("%s %s stderr F I1206 a line", l.src, at(l.at).Format(time.RFC3339Nano))
		line, ok := parseKeptLine(kept)
		if !ok {
			t.Fatalf("%q not read", kept)
		}
		lines = append(lines, line)
	}
	got := Handovers(lines)
	want := []time.Time{at(57), at(57.5), at(59.8), at(61)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handovers %v, want %v", got, want)
	}
	if got := Handovers(lines[:2]); len(got) != 0 {
		t.Errorf("one container is no handover: %v", got)
	}
}
