package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// sample is a surge run with every promise judged: one failure, one
// waiver, one skip, the rest passed.
func sample(t *testing.T) *Results {
	t.Helper()
	pair, err := promise.ParsePair("v1.35.4", "v1.36.3-acme.2")
	if err != nil {
		t.Fatal(err)
	}
	r := New(pair, Tool{Version: "v0.1.0", Go: "go1.26.8", Kind: "v0.33.0"}, t0)
	run := Run{Strategy: "surge", Cluster: "skewer-certify", Phases: []Phase{
		{Name: "create the cluster", Start: t0, End: t0.Add(3 * time.Minute)},
		{Name: "mixed window, one at v1.36.3", Start: t0.Add(3 * time.Minute), End: t0.Add(9 * time.Minute), Steps: []Phase{
			{Name: "start a v1.36.3 control-plane node to replace cp1", Node: "cp4", Start: t0.Add(3 * time.Minute), End: t0.Add(4 * time.Minute)},
			{Name: "join the new node with kubeadm", Node: "cp4", Start: t0.Add(4 * time.Minute), End: t0.Add(6 * time.Minute), Error: "context canceled"},
		}},
		{Name: "rollback", Start: t0.Add(9 * time.Minute), End: t0.Add(12 * time.Minute), Error: "context canceled"},
	}, Events: []Event{
		{Time: t0.Add(10 * time.Minute), Kind: "kubelet", Text: "kubelet on cp1 started again (it was stopped)", Meant: true},
		{Time: t0.Add(11 * time.Minute), Kind: "container", Text: "kube-system/coredns-x container coredns on cp1 restarted (count 1, exit code 137 Error)"},
	}}
	for _, p := range promise.Catalogue() {
		v := promise.Verdict{ID: p.ID, Outcome: promise.Pass}
		switch p.ID {
		case "rollout.no-lost-writes":
			v = promise.Verdict{ID: p.ID, Outcome: promise.Fail, Reason: "2 acknowledged write(s) missing <from a final list>", Evidence: []string{"w-1", "w-2",
				// As real evidence reads: a request and a log file, no space to break at.
				"GET /apis/admissionregistration.k8s.io/v1/namespaces/skewer-certify-traffic/mutatingadmissionpolicies?allowWatchBookmarks=true&resourceVersion=123456&timeoutSeconds=527&watch=true@skewer-certify-surge-control-plane5:/var/log/kubernetes/audit/audit-2026-12-06T00-45-01.123.log"}}
		case "proxy.fault.only-peer-gone":
			v = promise.Verdict{ID: p.ID, Outcome: promise.Waived, Reason: "a false 404", Reference: "https://github.com/kubernetes/kubernetes/blob/v1.36.3/x.go",
				Waiver: "clusters/waivers/upstream.yaml:7 (cause no-capable-peer, versions 1.35, 1.36)", Causes: []string{"no-capable-peer"}}
		case "sidecar.worker-replaced":
			v = promise.Verdict{ID: p.ID, Outcome: promise.NotApplicable, Reason: "the in-place strategy has no sidecar phase"}
		}
		run.Promises = append(run.Promises, Result{Verdict: v})
	}
	run.Promises[0].Measured = []string{"traffic: 5000 requests"}
	run.Disruption = []Backend{
		{Target: "lb", Conn: "new", Requests: 1000, Failed: 1, Codes: map[int]int{201: 999, 503: 1}, P50: 9 * time.Millisecond, P99: 90 * time.Millisecond, Unavailable: 200 * time.Millisecond},
		{Target: "lb", Requests: 5000, Failed: 3, Codes: map[int]int{0: 1, 200: 4997, 503: 2}, P50: 4 * time.Millisecond, P99: 80 * time.Millisecond, Unavailable: 1200 * time.Millisecond},
		{Target: "cp1", Requests: 1200, Codes: map[int]int{200: 1200}, P50: 3 * time.Millisecond, P99: 40 * time.Millisecond},
	}
	run.Steps = []StepLatency{
		{Phase: "add the new node to the load balancer", Conn: "reused", Requests: 400, Failed: 1, P50: 5 * time.Millisecond, P99: 70 * time.Millisecond,
			First: t0.Add(6 * time.Minute), Last: t0.Add(7 * time.Minute)},
		{Phase: "add the new node to the load balancer", Conn: "new", Requests: 200, P50: 9 * time.Millisecond, P99: 60 * time.Millisecond,
			First: t0.Add(6 * time.Minute), Last: t0.Add(7 * time.Minute)},
		{Phase: "remove the old node | from etcd", Conn: "reused", Requests: 300, Failed: 2, P50: 6 * time.Millisecond, P99: 900 * time.Millisecond},
	}
	signal := func(name, value, decision string) GuardSignal {
		return GuardSignal{Signal: name, Requests: 6, Value: value, Threshold: "<= 1% at 99% confidence", Decision: decision}
	}
	breach := signal("forwarded-failures", "6/6 (100.0%)", GuardBreach)
	run.Guard = []GuardedRollout{
		{Rollout: "resumed to v1.36.3-acme.2 with a breach on purpose", Injected: "every older apiserver's link to cp4 black-holed",
			Halted: &breach, HaltedAfter: "join the new node with kubeadm", Steps: []GuardStep{
				{Step: "start a v1.36.3-acme.2 control-plane node to replace cp2", Signals: []GuardSignal{signal("forwarded-failures", "0/0", GuardPending), signal("5xx-share", "0/62 (0.0%)", GuardOK)}},
				{Step: "join the new node with kubeadm", Signals: []GuardSignal{breach, signal("5xx-share", "0/156 (0.0%)", GuardOK)}}}},
		{Rollout: "roll back to v1.35.4", Steps: []GuardStep{
			{Step: "join the new node with kubeadm", Signals: []GuardSignal{signal("forwarded-failures", "0/44 (0.0%)", GuardOK), signal("5xx-share", "0/444 (0.0%)", GuardOK)}}}},
	}
	run.Canary = &Canary{Nodes: []string{"w1 (kubelet v1.35.4)", "cp4 (kubelet v1.36.3-acme.2)"}, Pods: 4, Rows: []CanaryRow{
		{Metric: "create to Ready, p99", Legacy: "3.9s", Native: "5.2s", StopCondition: "<= legacy + 5s"},
		{Metric: "log lines lost on deletion", Legacy: "37 of 2400", Native: "41 of 2380", StopCondition: "<= legacy", Breached: true}}}
	run.Memory = &Memory{PeakBytes: 3 << 30, At: t0.Add(11 * time.Minute), ClusterBytes: 2900 << 20, SkewerPeakBytes: 150 << 20, Samples: 180, Every: 5 * time.Second}
	run.Components = map[string][]Component{
		"created": {{Node: "cp1", Role: "control-plane", Kubelet: "v1.35.4", APIServer: "v1.35.4", APIServerFlags: []string{"kube-apiserver", "--feature-gates=UnknownVersionInteroperabilityProxy=true"}},
			{Node: "w1", Role: "worker", Kubelet: "v1.35.4"}},
		"end": {{Node: "cp4", Role: "control-plane", Kubelet: "v1.36.3-acme.2", APIServer: "v1.36.3-acme.2"}},
	}
	r.Runs = append(r.Runs, run)
	guard := promise.DefaultGuard
	r.GuardThresholds = &guard
	r.Host = &Host{Kernel: "6.1.0-40-amd64", Cgroup: "v1", Cores: 2, Docker: "20.10.24+dfsg1"}
	r.Images = []NodeImage{
		{Version: "v1.35.4", Ref: "skewer.local/node:v1.35.4", ID: "sha256:0123456789abcdef0123", Key: "5ae98f4d"},
		{Version: "v1.36.3-acme.2", Ref: "skewer.local/node:v1.36.3-acme.2-1a2b3c4d", ID: "sha256:fedcba9876543210fedc", Key: "9f8e7d6c",
			Given: &Given{Kind: "release-tarball", Path: "/srv/acme/kubernetes-server-linux-amd64.tar.gz", SHA256: strings.Repeat("ab", 32),
				Binaries: map[string]string{"kube-apiserver": strings.Repeat("01", 32), "kubelet": strings.Repeat("02", 32)}}},
	}
	if err := r.Finish(t0.Add(15 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteAndLoad(t *testing.T) {
	r := sample(t)
	if r.Outcome != promise.Fail {
		t.Fatalf("a failed promise fails the certification, got %s", r.Outcome)
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Load(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Errorf("results.json does not read back as written:\n%s\n%s", a, b)
	}
	for _, name := range []string{JUnitFile, SummaryFile, HTMLFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	c := got.Counts()
	if c[promise.Fail] != 1 || c[promise.Waived] != 1 || c[promise.NotApplicable] != 1 || c[promise.Pass] != len(promise.Catalogue())-3 {
		t.Errorf("counts %v", c)
	}
}

// The schema and Validate refuse what a report could not stand on.
func TestBadResultsAreRefused(t *testing.T) {
	r := sample(t)
	good, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	for _, tc := range []struct {
		name, want string
		edit       func(map[string]any)
	}{
		{"a failure without a reason", "reason", func(d map[string]any) {
			p := promiseIn(d, "rollout.no-lost-writes")
			delete(p, "reason")
		}},
		{"an unknown outcome", "outcome", func(d map[string]any) { promiseIn(d, "proxy.route.verbs")["outcome"] = "reported" }},
		{"a waiver without a reference", "reference", func(d map[string]any) { delete(promiseIn(d, "proxy.fault.only-peer-gone"), "reference") }},
		{"a waiver without the cause found", "causes", func(d map[string]any) { delete(promiseIn(d, "proxy.fault.only-peer-gone"), "causes") }},
		{"an error without a reason", "reason", func(d map[string]any) { promiseIn(d, "proxy.route.verbs")["outcome"] = "error" }},
		{"the old skipped", "outcome", func(d map[string]any) {
			p := promiseIn(d, "proxy.route.verbs")
			p["outcome"], p["reason"] = "skipped", "why"
		}},
		{"a pass over a failure", "add up to fail", func(d map[string]any) { d["outcome"] = "pass" }},
		{"a pass over an interrupted run", "add up to incomplete", func(d map[string]any) {
			d["incomplete"] = "interrupted"
			d["outcome"] = "fail"
		}},
		{"no coverage", "coverage", func(d map[string]any) { delete(d, "coverage") }},
		{"a field the schema does not know", "finding", func(d map[string]any) { d["finding"] = "free text" }},
		{"a promise left out", "has no verdict", func(d map[string]any) {
			run := d["runs"].([]any)[0].(map[string]any)
			run["promises"] = run["promises"].([]any)[1:]
		}},
		{"a version that is not one", "to", func(d map[string]any) { d["to"] = "1.36" }},
		{"a given binary's digest that is not one", "/given/binaries/kubelet", func(d map[string]any) {
			given := d["images"].([]any)[1].(map[string]any)["given"].(map[string]any)
			given["binaries"].(map[string]any)["kubelet"] = "latest"
		}},
		{"a guard signal of no known name", "/signal", func(d map[string]any) {
			guard := d["runs"].([]any)[0].(map[string]any)["guard"].([]any)[1].(map[string]any)
			guard["steps"].([]any)[0].(map[string]any)["signals"].([]any)[0].(map[string]any)["signal"] = "vibes"
		}},
		{"a guard decision of no known kind", "/decision", func(d map[string]any) {
			guard := d["runs"].([]any)[0].(map[string]any)["guard"].([]any)[0].(map[string]any)
			guard["halted"].(map[string]any)["decision"] = "maybe"
		}},
		{"a given of no known kind", "/given/kind", func(d map[string]any) {
			d["images"].([]any)[1].(map[string]any)["given"].(map[string]any)["kind"] = "rumour"
		}},
	} {
		doc = nil
		if err := json.Unmarshal(good, &doc); err != nil {
			t.Fatal(err)
		}
		tc.edit(doc)
		raw, _ := json.Marshal(doc)
		path := filepath.Join(t.TempDir(), ResultsFile)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	// Write refuses too, and leaves nothing behind.
	r.Runs[0].Promises = r.Runs[0].Promises[1:]
	if err := r.Validate(); err == nil {
		t.Error("results without a promise validate")
	}
}

func promiseIn(d map[string]any, id string) map[string]any {
	for _, p := range d["runs"].([]any)[0].(map[string]any)["promises"].([]any) {
		if m := p.(map[string]any); m["id"] == id {
			return m
		}
	}
	panic("no promise " + id)
}

func TestJUnitHasACasePerPromise(t *testing.T) {
	r := sample(t)
	var buf bytes.Buffer
	if err := r.JUnit(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Out string `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != len(promise.Catalogue()) || doc.Failures != 1 || doc.Skipped != 1 || !strings.Contains(buf.String(), `name="coverage" value="judged 75 of 76 promises; not judged: sidecar 1 of 28"`) {
		t.Errorf("tests %d failures %d skipped %d", doc.Tests, doc.Failures, doc.Skipped)
	}
	for _, c := range doc.Suites[0].Cases {
		switch c.Name {
		case "rollout.no-lost-writes":
			if c.Failure == nil || !strings.Contains(c.Failure.Message, "2 acknowledged") {
				t.Errorf("the failed promise: %+v", c)
			}
		case "proxy.fault.only-peer-gone":
			if c.Failure != nil || !strings.Contains(c.Out, "waived: a false 404 (https://github.com/kubernetes/kubernetes/blob/v1.36.3/x.go; waiver clusters/waivers/upstream.yaml:7") {
				t.Errorf("the waived promise: %+v", c)
			}
		}
	}
}

func TestSummary(t *testing.T) {
	md := sample(t).Summary()
	for _, want := range []string{
		"# skewer certify v1.35.4 -> v1.36.3-acme.2: FAIL\n\n**Coverage**: judged 75 of 76 promises; not judged: sidecar 1 of 28.",
		fmt.Sprintf("1 fail, 0 error, 1 waived, 1 not-applicable, 0 not-selected, %d pass", len(promise.Catalogue())-3),
		"(waiver clusters/waivers/upstream.yaml:7 (cause no-capable-peer, versions 1.35, 1.36))",
		"## Not applicable (the input rules it out)\n\n- **sidecar.worker-replaced** (surge): the in-place strategy has no sidecar phase",
		"## Failed\n\n- **rollout.no-lost-writes** (surge): 2 acknowledged write(s)",
		"[upstream](https://github.com/kubernetes/kubernetes/blob/v1.36.3/x.go)",
		"| `sidecar.worker-replaced` | not-applicable |",
		"| lb | reused | 5000 | 3 | 1.2s | 4ms | 80ms | none: 1, 200: 4997, 503: 2 |", // written before Conn: reused
		"| lb | new | 1000 | 1 | 200ms | 9ms | 90ms | 201: 999, 503: 1 |",
		"### Through the load balancer, step by step (surge)",
		"| remove the old node \\| from etcd | reused | 300 | 2 | 6ms | 900ms |",
		"Memory (surge): peak memory 3.00 GiB at 03:11:00 (the cluster's containers 2.83 GiB), skewer's own peak 0.15 GiB; 180 samples, every 5s.",
		"### Rollout guard (surge)\n\n| rollout | steps | ended | breach on purpose |\n|---|---|---|---|\n" +
			"| resumed to v1.36.3-acme.2 with a breach on purpose | 2 | halted after \"join the new node with kubeadm\": forwarded-failures 6/6 (100.0%), threshold <= 1% at 99% confidence | every older apiserver's link to cp4 black-holed |\n" +
			"| roll back to v1.35.4 | 1 | not halted |  |",
		"### Sidecar canary (surge): 4 Pods of each template on w1 (kubelet v1.35.4), cp4 (kubelet v1.36.3-acme.2)\n\n| metric | legacy | native | stop condition | |\n|---|---|---|---|---|\n" +
			"| create to Ready, p99 | 3.9s | 5.2s | <= legacy + 5s |  |\n| log lines lost on deletion | 37 of 2400 | 41 of 2380 | <= legacy | **breached** |",
		"host: Linux 6.1.0-40-amd64, cgroup v1, 2 cores, Docker 20.10.24+dfsg1; v1.35.4: `skewer.local/node:v1.35.4` sha256:0123456789a",
		"v1.36.3-acme.2: `skewer.local/node:v1.36.3-acme.2-1a2b3c4d` sha256:fedcba987654 (built around the release-tarball /srv/acme/kubernetes-server-linux-amd64.tar.gz given)",
		"## Given builds\n\n| version | binary | sha256 |\n|---|---|---|\n| v1.36.3-acme.2 | (the tarball) | `" + strings.Repeat("ab", 32) + "` |\n",
		"| v1.36.3-acme.2 | kube-apiserver | `" + strings.Repeat("01", 32) + "` |\n| v1.36.3-acme.2 | kubelet | `" + strings.Repeat("02", 32) + "` |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}

// Results cut short say so, in results.json (which still loads) and in
// the summary's first line.
func TestIncompleteResults(t *testing.T) {
	r := sample(t)
	r.Incomplete = "interrupted after 1 of 2 run(s): context canceled"
	if err := r.Write(t.TempDir()); err == nil {
		t.Fatal("results cut short that still say fail were written")
	}
	if err := r.Finish(r.Finished); err != nil || r.Outcome != promise.Incomplete {
		t.Fatalf("finished again: %s, %v", r.Outcome, err)
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Incomplete != r.Incomplete {
		t.Errorf("incomplete after a round trip: %q", back.Incomplete)
	}
	md := back.Summary()
	for _, want := range []string{": INCOMPLETE\n", "**Incomplete**: interrupted after 1 of 2 run(s)"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}
