package rollout

import (
	"os"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

func TestRecordRoundTripAndAbsence(t *testing.T) {
	c := &cluster.Cluster{Name: "c", Dir: t.TempDir()}
	if r, err := LoadRecord(c); r != nil || err != nil {
		t.Fatalf("no record: got %v, %v; want nil, nil", r, err)
	}
	want := Record{From: version.MustParse("v1.35.4"), To: version.MustParse("v1.36.3"), Strategy: StrategySurge, ControlPlanes: 3}
	if err := want.save(c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadRecord(c)
	if err != nil || got == nil || *got != want {
		t.Fatalf("LoadRecord = %+v, %v; want %+v", got, err, want)
	}
	if err := removeRecord(c); err != nil {
		t.Fatal(err)
	}
	if r, err := LoadRecord(c); r != nil || err != nil {
		t.Fatalf("after remove: %v, %v", r, err)
	}
}

// A record that cannot be trusted is an error that says so, never "no
// rollout recorded": a rollback must not guess where to return.
func TestCorruptRecordIsAnError(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":        `{"from":"v1.35.4","to":"v1.3`,
		"bad version":      `{"from":"1.35","to":"v1.36.3","strategy":"surge","controlPlanes":3}`,
		"no from":          `{"to":"v1.36.3","strategy":"surge","controlPlanes":3}`,
		"unknown strategy": `{"from":"v1.35.4","to":"v1.36.3","strategy":"blue-green","controlPlanes":3}`,
		"no control plane": `{"from":"v1.35.4","to":"v1.36.3","strategy":"surge","controlPlanes":0}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := &cluster.Cluster{Name: "c", Dir: t.TempDir()}
			if err := os.WriteFile(recordPath(c), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := LoadRecord(c)
			if err == nil || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), "--to") {
				t.Fatalf("LoadRecord = %+v, %v; want a corrupt-record error naming --to", r, err)
			}
		})
	}
}
