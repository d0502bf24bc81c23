package spoold

import "testing"

func TestScriptEnvAllows(t *testing.T) {
	a, err := NewScriptEnv([]string{"OPENAI_API_KEY", "AGENT_*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, value string
		want        bool
	}{
		{"VMSPOOL_TASK", "fix the build; $(rm -rf /)", true},
		{"LANG", "C.UTF-8", true},
		{"LC_ALL", "en_US.UTF-8@euro", true},
		{"LANGUAGE", "fr:en", true},
		{"LANG", "/tmp/crafted", false},
		{"TZ", "Europe/Paris", true},
		{"OPENAI_API_KEY", "sk-x", true},
		{"AGENT_MODEL", "m", true},
		{"PATH", "/tmp/fake:/usr/bin", false},
		{"HOME", "/tmp/h", false},
		{"XDG_CONFIG_HOME", "/tmp/x", false},
		{"GIT_CONFIG_COUNT", "1", false},
		{"GIT_CONFIG_KEY_0", "core.fsmonitor", false},
		{"GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='x'", false},
		{"GIT_DIR", "/tmp/x", false},
		{"GIT_EXTERNAL_DIFF", "/tmp/x", false},
		{"BASH_ENV", "/tmp/x", false},
		{"BASH_FUNC_git%%", "() { :; }", false},
		{"LD_PRELOAD", "/tmp/x.so", false},
		{"SHELLOPTS", "xtrace", false},
		{"PS4", "$(x)", false},
		{"FOO", "bar", false},
		{"", "x", false},
		{"VMSPOOL_", "x", true},
	} {
		if got := a.Allows(c.name, c.value); got != c.want {
			t.Errorf("Allows(%q, %q) = %v; want %v", c.name, c.value, got, c.want)
		}
	}
}

func TestScriptEnvRefusesUnsafeNames(t *testing.T) {
	for _, extra := range []string{"PATH", "HOME", "GIT_DIR", "GIT*", "G*", "*", "XDG_CONFIG_HOME", "X*", "LD_PRELOAD",
		"BASH_ENV", "SPOOL_JOB", "PA*", "1X", "A-B", "PS4", "EDITOR", "SSH_ASKPASS", "TMPDIR"} {
		if _, err := NewScriptEnv([]string{extra}); err == nil {
			t.Errorf("NewScriptEnv(%q) accepted it", extra)
		}
	}
	for _, extra := range []string{"OPENAI_API_KEY", "AGENT_*", "MY_TOKEN", "PATHS_TO_SCAN"} {
		if _, err := NewScriptEnv([]string{extra}); err != nil {
			t.Errorf("NewScriptEnv(%q): %v", extra, err)
		}
	}
}
