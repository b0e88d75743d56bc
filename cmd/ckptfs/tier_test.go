package main

import (
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// TestPassFailuresWarnOnce: a tier pass failing the same way every
// interval warns once, then logs at debug level until the error changes
// or a pass succeeds.
func TestPassFailuresWarnOnce(t *testing.T) {
	hook := logtest.NewGlobal()
	defer hook.Reset()
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	defer logrus.SetLevel(level)
	var p passFailures
	full := errors.New("device full")
	steps := []struct {
		err  error
		ok   bool
		want logrus.Level
	}{
		{full, false, logrus.WarnLevel},
		{full, false, logrus.DebugLevel},
		{full, false, logrus.DebugLevel},
		{errors.New("chunk at 0: corrupt"), false, logrus.WarnLevel},
		{nil, true, logrus.InfoLevel},
		{full, false, logrus.WarnLevel},
		{nil, true, logrus.InfoLevel},
	}
	for i, st := range steps {
		hook.Reset()
		if ok := p.report(st.err); ok != st.ok {
			t.Fatalf("step %d: report(%v) = %v", i, st.err, ok)
		}
		if len(hook.Entries) != 1 || hook.LastEntry().Level != st.want {
			t.Fatalf("step %d: %d log entries, last %v; want one at %v", i, len(hook.Entries), hook.LastEntry(), st.want)
		}
	}
	hook.Reset()
	if !p.report(nil) || len(hook.Entries) != 0 {
		t.Fatalf("a pass after a pass: %d log entries", len(hook.Entries))
	}
}
