package cluster

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/log"
)

// progress is kind's logger printed as one line per step with the time
// since the start, which is what a user watching a long create wants.
type progress struct {
	mu        sync.Mutex
	out       io.Writer
	start     time.Time
	verbosity log.Level
}

func newProgress(out io.Writer, verbosity int) *progress {
	return &progress{out: out, start: time.Now(), verbosity: log.Level(verbosity)}
}

func (p *progress) line(msg string) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "[%7s] %s\n", elapsed(time.Since(p.start)), msg)
}

func (p *progress) Warn(message string)                       { p.line("warning: " + message) }
func (p *progress) Warnf(format string, args ...interface{})  { p.Warn(fmt.Sprintf(format, args...)) }
func (p *progress) Error(message string)                      { p.line("error: " + message) }
func (p *progress) Errorf(format string, args ...interface{}) { p.Error(fmt.Sprintf(format, args...)) }
func (p *progress) Info(message string)                       { p.line(message) }
func (p *progress) Infof(format string, args ...interface{})  { p.Info(fmt.Sprintf(format, args...)) }

// V keeps kind's status lines (level 0) and its debug output up to the
// verbosity asked for.
func (p *progress) V(level log.Level) log.InfoLogger {
	if level > p.verbosity {
		return discard{}
	}
	return p
}

func (p *progress) Enabled() bool { return true }

type discard struct{}

func (discard) Info(string)                  {}
func (discard) Infof(string, ...interface{}) {}
func (discard) Enabled() bool                { return false }
