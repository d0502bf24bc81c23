package machine

import (
	"bytes"
	"context"
	"testing"
)

func TestMachineRun(t *testing.T) {
	var out bytes.Buffer
	code, err := Machine{Shell: "sh"}.Run(context.Background(), "echo $0-ok; exit 7", nil, &out, &out)
	if err != nil || code != 7 || out.String() != "sh-ok\n" {
		t.Errorf("Run = %d, %v, %q", code, err, out.String())
	}
	out.Reset()
	code, err = Machine{Command: "cat >/dev/null; echo fed"}.Run(context.Background(), "ignored", nil, &out, &out)
	if err != nil || code != 0 || out.String() != "fed\n" {
		t.Errorf("Run = %d, %v, %q", code, err, out.String())
	}
	code, err = Machine{Shell: "/nonexistent/shell"}.Run(context.Background(), "true", nil, &out, &out)
	if err == nil || code != ExitNotStarted {
		t.Errorf("Run with a missing shell = %d, %v", code, err)
	}
	code, _ = Machine{Shell: "sh"}.Run(context.Background(), "kill -9 $$", nil, &out, &out)
	if code != 128+9 {
		t.Errorf("killed run = %d, want 137", code)
	}
}
