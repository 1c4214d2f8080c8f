package report

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// browser is Debian's chromium, which `make test` installs (make
// test-deps), or the one $SKEWER_BROWSER names (a CI runner's Chrome).
func browser() string {
	if b := os.Getenv("SKEWER_BROWSER"); b != "" {
		return b
	}
	return "/usr/bin/chromium"
}

// The page stands alone: nothing in it loads from anywhere.
func TestHTMLIsSelfContained(t *testing.T) {
	var buf bytes.Buffer
	if err := sample(t).html(&buf, ""); err != nil {
		t.Fatal(err)
	}
	loads := regexp.MustCompile(`(?i)<(?:script|link|img|iframe)[^>]*\s(?:src|href)="([^"]*)"|url\(|@import`)
	for _, m := range loads.FindAllStringSubmatch(buf.String(), -1) {
		if !strings.HasPrefix(m[1], "data:") {
			t.Errorf("report.html loads something from outside: %q", m[0])
		}
	}
}

// A real browser renders the page: the verdict, the counts, a row per
// promise, the timeline, and the outcome filter working by a click.
func TestHTMLInABrowser(t *testing.T) {
	chromium := browser()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s: %v (make test-deps installs Debian's chromium; SKEWER_BROWSER names another)", chromium, err)
	}
	r := sample(t)
	// Written as certify writes it, beside the run's evidence: the failed
	// verdict names control-plane5, which has an audit log and a kept
	// apiserver log; control-plane (a prefix of its name) is not named.
	dir := t.TempDir()
	for _, f := range []string{
		"evidence/surge/audit/skewer-certify-surge-control-plane5/audit.log",
		"evidence/surge/logs/apiservers/skewer-certify-surge-control-plane5.log",
		"evidence/surge/audit/skewer-certify-surge-control-plane/audit.log",
		"evidence/surge/logs/skewer-certify-surge-control-plane/kubelet.log",
		"evidence/surge/metrics/00-start-create/cp1.prom",
		"evidence/surge/traffic.json",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	// Served on loopback, and every other request the page would make is
	// counted: there must be none.
	var others []string
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/report.html" {
			others = append(others, req.URL.Path)
		}
		files.ServeHTTP(w, req)
	}))
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1024, 768), chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first run starts the browser and must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/report.html")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	count := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return n
	}
	click := func(sel string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(sel)); err != nil {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
	visibleRows := `Array.from(document.querySelectorAll('tr.promise')).filter(r => r.offsetParent !== null).length`

	if v := text("#verdict"); v != "fail" {
		t.Errorf("verdict %q", v)
	}
	if want, got := fmt.Sprintf("1 fail, 0 error, 1 waived, 1 not-applicable, 0 not-selected, %d pass", len(promise.Catalogue())-3), text("#counts"); got != want {
		t.Errorf("counts %q, want %q", got, want)
	}
	if want, got := "Coverage: judged 75 of 76 promises; not judged: sidecar 1 of 28", text("#coverage"); got != want {
		t.Errorf("coverage %q, want %q", got, want)
	}
	rows := count(`document.querySelectorAll('tr.promise').length`)
	if rows != len(promise.Catalogue()) {
		t.Errorf("%d rows for %d promises", rows, len(promise.Catalogue()))
	}
	// What failed comes first, then errors, waivers and passes; what the
	// run does not judge is apart, folded.
	order, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('table.verdicts tr.promise')).map(r => r.dataset.outcome)`))
	if err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{"fail": 0, "error": 1, "waived": 2, "pass": 3}
	for i, o := range order {
		if _, ok := rank[o]; !ok || i > 0 && rank[order[i-1]] > rank[o] {
			t.Errorf("verdict rows out of order at %d: %v", i, order)
			break
		}
	}
	if len(order) == 0 || order[0] != "fail" {
		t.Errorf("the first verdict row is not the failure: %v", order)
	}
	if n := count(`document.querySelectorAll('details.not-judged:not([open]) tr.promise[data-outcome="not-applicable"]').length`); n != 1 {
		t.Errorf("%d not-applicable rows folded apart, want 1", n)
	}
	if h := text("#host"); !strings.Contains(h, "cgroup v1 · 2 cores") {
		t.Errorf("host line %q", h)
	}
	given, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelectorAll('p.image')[1].textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(given, "given: release-tarball /srv/acme/kubernetes-server-linux-amd64.tar.gz sha256 "+strings.Repeat("ab", 32)) {
		t.Errorf("the given release's line %q", given)
	}
	if n := count(`document.querySelectorAll('details.given table.binaries tr').length`); n != 2 {
		t.Errorf("%d rows of given binaries, want 2", n)
	}
	if n := count(`document.querySelectorAll('tr.step').length`); n != 3 {
		t.Errorf("%d rows in the step-by-step table, want 3", n)
	}
	// Each guarded rollout's signal table, a row per step; the halted one
	// open, its breach marked.
	if n := count(`document.querySelectorAll('details.guard').length`); n != 2 {
		t.Errorf("%d rollout guard tables, want 2", n)
	}
	if n := count(`document.querySelectorAll('details.guard[open] tr.guard-step').length`); n != 2 {
		t.Errorf("%d rows in the open (halted) guard table, want 2", n)
	}
	if n := count(`document.querySelectorAll('td[data-decision="breach"]').length`); n != 1 {
		t.Errorf("%d breach cells, want 1", n)
	}
	if s := text("details.guard[open] summary"); !strings.Contains(s, `halted after "join the new node with kubeadm": forwarded-failures 6/6 (100.0%)`) {
		t.Errorf("the halted table's summary %q", s)
	}
	// The sidecar canary's table, open on its breach, the row marked.
	if n := count(`document.querySelectorAll('details.canary[open] tr.canary-row').length`); n != 2 {
		t.Errorf("%d rows in the open canary table, want 2", n)
	}
	if s := text(`details.canary tr.canary-row[data-breached="true"]`); !strings.Contains(s, "log lines lost on deletion") {
		t.Errorf("the breached canary row %q", s)
	}
	if m := text("p.memory"); !strings.HasPrefix(m, "peak memory 3.00 GiB") {
		t.Errorf("the memory line %q", m)
	}
	if n := count(`document.querySelectorAll('tr.backend').length`); n != 3 {
		t.Errorf("%d rows in the disruption table, want lb (new and reused) and cp1", n)
	}
	if n := count(`document.querySelectorAll('tr.component').length`); n != 3 {
		t.Errorf("%d component rows, want 3 (two when created, one at the end)", n)
	}
	if n := count(`document.querySelectorAll('p.image').length`); n != 2 {
		t.Errorf("%d node images shown, want 2", n)
	}
	if n := count(`document.querySelectorAll('.lane[data-lane="phases"] .bar').length`); n != 3 {
		t.Errorf("%d bars in the phases' lane for 3 phases", n)
	}
	// A lane per node a step changed, per kind of connection the traffic's
	// steps were timed on (red where requests failed), then the events.
	lanes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.lane[data-lane]')).map(l => l.dataset.lane + ':' + l.querySelector('.label').textContent + ':' + l.querySelectorAll('.bar').length + ':' + l.querySelectorAll('.bar.error').length)`))
	if want := "phases:phases:3:1 node:cp4:2:1 traffic:traffic, reused:1:1 traffic:traffic, new:1:0 events:events:0:0"; err != nil || strings.Join(lanes, " ") != want {
		t.Errorf("lanes %v (%v), want %s", lanes, err, want)
	}
	// The page's top as a reader first sees it, kept with the run's artifacts.
	if out := os.Getenv("ARTIFACTS"); out != "" {
		if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
			t.Errorf("screenshot: %v", err)
		} else if err := os.MkdirAll(out, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(out, "report-sample.png"), png, 0o644)
		}
	}
	// Each verdict links the files it rests on, and every link resolves
	// inside the report's folder.
	links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('tr[data-outcome="fail"] ul.links a')).map(a => a.getAttribute('href'))`))
	if want := "evidence/surge/audit/skewer-certify-surge-control-plane5/ evidence/surge/logs/apiservers/skewer-certify-surge-control-plane5.log evidence/surge/traffic.json evidence/surge/"; err != nil || strings.Join(links, " ") != want {
		t.Errorf("the failure links %v (%v), want %s", links, err, want)
	}
	if n := count(`document.querySelectorAll('tr[data-area="proxy"] ul.links a[href="evidence/surge/metrics/"]').length`); n != 2 {
		t.Errorf("%d verdicts on metrics link the metrics, want proxy.metrics.rerouted and peer-proxy-errors", n)
	}
	all, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('ul.links a')).map(a => a.getAttribute('href'))`))
	if err != nil || len(all) < len(promise.Catalogue()) {
		t.Errorf("%d links (%v), want one at least per verdict", len(all), err)
	}
	for _, href := range all {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(href))); err != nil || strings.HasPrefix(href, "/") || strings.Contains(href, "..") {
			t.Errorf("link %s does not resolve inside the report's folder: %v", href, err)
			break
		}
	}
	if labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.axis span')).map(s => s.textContent)`)); err != nil || len(labels) < 2 || labels[0] != "0" {
		t.Errorf("the timeline's axis reads %v (%v), want marks from 0", labels, err)
	}
	if n := count(`document.querySelectorAll('.timeline .tick').length`); n != 2 {
		t.Errorf("%d ticks on the timeline for 2 events", n)
	}
	if n := count(`document.querySelectorAll('.timeline .tick.unexpected').length`); n != 1 {
		t.Errorf("%d ticks marked unexpected, want the CoreDNS restart", n)
	}
	click(`.filters button[data-show="fail"]`)
	if n := count(visibleRows); n != 1 {
		t.Errorf("the fail filter shows %d rows, want the one failure", n)
	}
	if id := text(`tr.promise[data-outcome="fail"] td.id`); id != "rollout.no-lost-writes" {
		t.Errorf("the row shown for fail is %q", id)
	}
	click(`.filters button[data-show="not-applicable"]`)
	if n := count(visibleRows); n != 1 {
		t.Errorf("the not-applicable filter shows %d rows, want the one, unfolded", n)
	}
	click(`.filters button[data-show="all"]`)
	if n := count(visibleRows); n != rows {
		t.Errorf("all shows %d of %d rows", n, rows)
	}
	// A laptop's window of 1,024 px shows the page without scrolling
	// sideways, every fold open: long evidence wraps or folds.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelectorAll('details').forEach(d => d.open = true); true`)); err != nil {
		t.Fatal(err)
	}
	if w := count(`window.innerWidth`); w != 1024 {
		t.Errorf("the window is %d px wide, want 1024", w)
	}
	if over := count(`document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth).slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().width))`))
		t.Errorf("at 1,024 px the page scrolls sideways by %d px; widest: %v", over, wide)
	}
	if len(others) > 0 {
		t.Errorf("the page asked the server for more: %v", others)
	}
	// A link followed opens its file from the folder.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/evidence/surge/logs/apiservers/skewer-certify-surge-control-plane5.log")); err != nil {
		t.Fatal(err)
	}
	if body := strings.TrimSpace(text("body")); body != "x" {
		t.Errorf("the linked log reads %q", body)
	}
}

// A run's time axis marks round times, at most ten besides the start,
// each where it falls on the line.
func TestAxis(t *testing.T) {
	for _, c := range []struct {
		total time.Duration
		want  string
	}{
		{33*time.Minute + 38*time.Second, "0@0 5m@14.87 10m@29.73 15m@44.6 20m@59.46 25m@74.33 30m@89.2"},
		{45 * time.Second, "0@0 30s@66.67"},
		{4*time.Minute + 30*time.Second, "0@0 30s@11.11 1m@22.22 1m30s@33.33 2m@44.44 2m30s@55.56 3m@66.67 3m30s@77.78 4m@88.89 4m30s@100"},
		{2 * time.Hour, "0@0 15m@12.5 30m@25 45m@37.5 1h@50 1h15m@62.5 1h30m@75 1h45m@87.5 2h@100"},
	} {
		var got []string
		for _, m := range axis(c.total) {
			got = append(got, fmt.Sprintf("%s@%v", m.Label, m.Left))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("axis(%s) = %s, want %s", c.total, g, c.want)
		}
	}
}

// A node is named by its whole name only: cp1 is not named by cp10 or
// by my-cp1, and is by "cp1:6443" or at the end of a line.
func TestNames(t *testing.T) {
	for text, want := range map[string]bool{
		"served by cp1":     true,
		"cp1:6443 answered": true,
		"on cp10":           false,
		"on my-cp1":         false,
		"cp10 and then cp1": true,
		"nothing":           false,
	} {
		if got := names(text, "cp1"); got != want {
			t.Errorf("names(%q, cp1) = %v, want %v", text, got, want)
		}
	}
}

// A step of the traffic from results written before steps were timed has
// no place on the timeline (it stays in the table); the lanes are the
// phases' and the events' then.
func TestLanesOfOldResults(t *testing.T) {
	run := Run{Phases: []Phase{{Name: "create", Start: t0, End: t0.Add(time.Minute)}},
		Steps: []StepLatency{{Phase: "01 join", Conn: "reused", Requests: 3}}}
	ls, _ := lanes(run)
	var kinds []string
	for _, l := range ls {
		kinds = append(kinds, l.Kind)
	}
	if got := strings.Join(kinds, " "); got != "phases events" {
		t.Errorf("lanes %s, want phases events", got)
	}
}

// A bar never leaves its line: traffic timed past the phases is cut at
// their end, and a step of no length is still drawn.
func TestLanesKeepBarsOnTheLine(t *testing.T) {
	run := Run{Phases: []Phase{{Name: "roll", Start: t0, End: t0.Add(10 * time.Minute)}},
		Steps: []StepLatency{
			{Phase: "01 join", Conn: "reused", Requests: 3, First: t0.Add(-time.Minute), Last: t0.Add(11 * time.Minute)},
			{Phase: "02 done", Conn: "reused", Requests: 1, First: t0.Add(10 * time.Minute), Last: t0.Add(10 * time.Minute)},
		}}
	ls, _ := lanes(run)
	if len(ls) != 3 || ls[1].Kind != "traffic" || len(ls[1].Bars) != 2 {
		t.Fatalf("lanes %+v", ls)
	}
	for _, b := range ls[1].Bars {
		if b.Left < 0 || b.Width < 0.5 || b.Left+b.Width > 100 {
			t.Errorf("%s at %v%% for %v%%: off the line", b.Name, b.Left, b.Width)
		}
	}
}
