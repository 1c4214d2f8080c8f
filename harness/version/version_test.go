package version

import (
	"encoding/json"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"v1.36.3":        "v1.36.3",
		"1.36.3":         "v1.36.3",
		"v1.36.3-acme.2": "v1.36.3-acme.2",
		"v1.36.3+k3s1":   "v1.36.3+k3s1",
		" v1.35.4\n":     "v1.35.4",
	} {
		v, err := Parse(in)
		if err != nil || v.String() != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, v, err, want)
		}
	}
	for _, bad := range []string{"", "v1.36", "latest", "v1.36.x", "1"} {
		if v, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, v)
		}
	}
}

func TestSuffixedBuildKeepsItsMinor(t *testing.T) {
	acme := MustParse("v1.36.3-acme.2")
	if acme.Minor() != 36 || acme.Patch() != 3 {
		t.Fatalf("v1.36.3-acme.2: minor %d patch %d", acme.Minor(), acme.Patch())
	}
	if got := acme.MinorsApart(MustParse("v1.35.4")); got != 1 {
		t.Errorf("v1.36.3-acme.2 and v1.35.4 are %d minors apart, want 1", got)
	}
	if !MustParse("v1.36.3+k3s1").Equal(MustParse("v1.36.3")) {
		t.Error("build metadata changed the release")
	}
}

func TestCompare(t *testing.T) {
	order := []string{"v1.35.4", "v1.36.0-rc.1", "v1.36.0", "v1.36.3", "v1.37.2", "v2.0.0"}
	for i := range order {
		for j := range order {
			a, b := MustParse(order[i]), MustParse(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s vs %s = %d, want %d", a, b, got, want)
			}
		}
	}
	if MustParse("v2.0.0").MinorsApart(MustParse("v1.99.0")) < 2 {
		t.Error("a different major must be too far apart")
	}
	var zero Version
	if !zero.IsZero() || zero.String() != "" || !zero.Less(MustParse("v1.0.0")) {
		t.Error("the zero Version is no version, older than any")
	}
}

func TestText(t *testing.T) {
	var rec struct {
		From Version `json:"from"`
		To   Version `json:"to,omitempty"`
	}
	if err := json.Unmarshal([]byte(`{"from":"1.35.4","to":""}`), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.From.String() != "v1.35.4" || !rec.To.IsZero() {
		t.Fatalf("decoded %+v", rec)
	}
	out, _ := json.Marshal(rec)
	if string(out) != `{"from":"v1.35.4","to":""}` {
		t.Errorf("encoded %s", out)
	}
	if err := json.Unmarshal([]byte(`{"from":"v1.36"}`), &rec); err == nil {
		t.Error("a malformed version decoded")
	}
	var flagged Version
	if err := flagged.Set("v1.36.3"); err != nil || flagged.String() != "v1.36.3" || flagged.Type() != "version" {
		t.Errorf("Set: %v %v", flagged, err)
	}
}

func TestEqualValuesCompareWithDoubleEquals(t *testing.T) {
	a, b := MustParse("1.36.3"), MustParse("v1.36.3")
	if a != b {
		t.Errorf("%v != %v: a Version must compare by value", a, b)
	}
	if MustParse("v1.36.3+k3s1") == b || !MustParse("v1.36.3+k3s1").Equal(b) {
		t.Error("build metadata: a different text, the same release")
	}
}
