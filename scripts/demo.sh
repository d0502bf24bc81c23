#!/bin/sh
# The demo (`make demo`): one chat, two runs, a question, a refused commit,
# on a spool of its own in ./var/demo. No root, no setup: it needs only the
# binaries in ./bin (make builds them) and a POSIX shell.
#
# What to notice: the second run's watcher starts the moment the run is
# submitted, while the first run's "done" is still fresh, and it does not
# stop there; it follows the second run, question and all, to its own end.
#
# Environment: BIN (default ./bin), DEMO_DIR (default ./var/demo),
# DEMO_PACE (seconds between a run's lines, default 0.5).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$top/bin}
DEMO_DIR=${DEMO_DIR:-$top/var/demo}
PACE=${DEMO_PACE:-0.5}

for b in spool spoold watchd vmgate; do
	if [ ! -x "$BIN/$b" ]; then
		echo "demo: $BIN/$b is missing; run make first" >&2
		exit 2
	fi
done

# The jobs call `spool say` and `spool ask`: the demo's binaries come first.
PATH=$BIN:$PATH
SPOOL_DIR=$DEMO_DIR/spool
export PATH SPOOL_DIR
unset JOBS_DIR SPOOL_JOB SPOOL_CHAT SPOOL_EVENTS 2>/dev/null || true

rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"

# Everything started in the background, to stop exactly that on the way out.
pids=""
stop() {
	trap - EXIT INT TERM
	for p in $pids; do
		kill "$p" 2>/dev/null || true
	done
	for p in $pids; do
		wait "$p" 2>/dev/null || true
	done
}
trap stop EXIT
trap 'echo; echo "demo: interrupted; stopping what it started"; exit 130' INT
trap 'exit 143' TERM

if [ -t 1 ]; then
	step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	step() { printf '\n== %s\n' "$*"; }
fi
note() { printf '   %s\n' "$*"; }

waitfor() { # waitfor WHAT TEST...: polls TEST for up to 20 s
	what=$1
	shift
	i=0
	until "$@"; do
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			echo "demo: timed out waiting for $what; logs in $DEMO_DIR" >&2
			exit 1
		fi
		sleep 0.1
	done
}

step "Starting spoold and watchd serve on a fresh spool: $SPOOL_DIR"
spoold --spool "$SPOOL_DIR" --workers 2 2>"$DEMO_DIR/spoold.log" &
pids="$pids $!"
waitfor "spoold to make the tree" test -d "$SPOOL_DIR/progress"
watchd serve --spool "$SPOOL_DIR" --listen 127.0.0.1:0 --addr-file "$DEMO_DIR/watchd.addr" >"$DEMO_DIR/watchd.out" 2>"$DEMO_DIR/watchd.log" &
pids="$pids $!"
waitfor "watchd serve to listen" test -s "$DEMO_DIR/watchd.addr"
addr=$(cat "$DEMO_DIR/watchd.addr")
note "spoold runs the queue (log: $DEMO_DIR/spoold.log)"
# The page asks for the token of $SPOOL_DIR/watchd/token, readable by the
# spool's group; watchd serve printed the address that carries it.
note "watchd serve: http://$addr/#token=$(cat "$SPOOL_DIR/watchd/token") (a live page; log: $DEMO_DIR/watchd.log)"
note "           and its unix socket, $SPOOL_DIR/watchd/serve.sock (no token: its mode decides)"

# Run 1: an app, a dozen lines.
cat >"$DEMO_DIR/app.sh" <<EOF
for what in "reading the request" "choosing a stack: Go + SQLite" "making the module" \\
	"writing the schema" "writing the handlers" "writing the templates" \\
	"adding a health check" "running go vet" "running the tests: 14 passed" \\
	"building the binary" "writing the README" "the app is ready"; do
	spool say "\$what"
	sleep $PACE
done
EOF
# Run 2: the fix; longer, and it asks the person before it ships.
cat >"$DEMO_DIR/fix.sh" <<EOF
for what in "reading the bug report" "reproducing: the form loses its input" \\
	"found it: the handler ignores the POST body" "writing a failing test" \\
	"fixing the handler" "the new test passes" "running all the tests: 15 passed"; do
	spool say "\$what"
	sleep $PACE
done
answer=\$(spool ask --options yes,no "Ship the fix?")
spool say "the person said: \$answer"
if [ "\$answer" = yes ]; then
	for what in "building the release" "deploying to staging" "smoke test passed" "shipped"; do
		spool say "\$what"
		sleep $PACE
	done
else
	spool say "not shipping; the fix stays in the work tree"
fi
EOF

step "1. Chat 'shop' asks for an app"
j1=$(spool submit --chat shop -- sh "$DEMO_DIR/app.sh")
note "spool submit printed the job id: $j1"
note "watchd follow --chat shop --job $j1 prints each status until the run ends:"
watchd follow --chat shop --job "$j1"
note "(exit $?: the run is done)"

step "2. The same chat asks for a fix: a second run, followed from the moment it is submitted"
j2=$(spool submit --chat shop -- sh "$DEMO_DIR/fix.sh")
note "job $j2; run 1's 'done' was in progress/shop a moment ago, and the old"
note "Python watcher announced it four seconds into the new run. This one waits"
note "for run 2, and ends only when run 2 ends."
# The same run over server-sent events, saved for later.
curl_pid=""
if command -v curl >/dev/null 2>&1; then
	curl -sN --unix-socket "$SPOOL_DIR/watchd/serve.sock" "http://localhost/chats/shop/events?job=$j2" >"$DEMO_DIR/run2.sse" 2>/dev/null &
	curl_pid=$!
	pids="$pids $curl_pid"
fi
# The person, answering once the question shows.
(
	until grep -q '"question":{' "$SPOOL_DIR/progress/shop" 2>/dev/null; do sleep 0.1; done
	sleep 1
	echo "   >>> the person answers: spool answer --chat shop yes"
	spool answer --chat shop yes >/dev/null
) &
pids="$pids $!"
watchd follow --chat shop --job "$j2"
note "(exit $?: run 2 is done, and only now did the watcher stop)"
if [ -n "$curl_pid" ]; then
	waitfor "the event stream to end" sh -c "! kill -0 $curl_pid 2>/dev/null"
	note "The same run as GET /chats/shop/events gave it (first and last events):"
	grep '^data: ' "$DEMO_DIR/run2.sse" | sed -n '1p;$p' | cut -c1-150 | sed 's/^/   /'
fi

step "3. In chat 'tools', a script that tries to commit: the gate refuses it, and nothing of it runs"
cat >"$DEMO_DIR/commit.sh" <<'EOF'
echo "about to commit"
git commit -am "ship it"
EOF
note "script: $(tr '\n' ';' <"$DEMO_DIR/commit.sh")"
j3=$(spool submit --chat tools --script "$DEMO_DIR/commit.sh")
code=0
watchd follow --chat tools --job "$j3" --json >"$DEMO_DIR/run3.json" || code=$?
note "watchd follow exited $code (the run failed); its last --json line, as Open WebUI gets it:"
tail -n 1 "$DEMO_DIR/run3.json" | cut -c1-160 | sed 's/^/   /'
note "spool show $j3:"
spool show "$j3" | grep -E '^(state|script|result)' | cut -c1-160 | sed 's/^/   /'

step "4. What an operator sees: spool ls, then ls and cat of the tree"
spool ls
echo
(cd "$SPOOL_DIR" && ls -la . progress)
echo
note "cat progress/shop (the chat's current run, replaced atomically on every flush; first 400 bytes):"
head -c 400 "$SPOOL_DIR/progress/shop"
echo " ..."
note "cat $j2.done (the fix's result):"
cat "$SPOOL_DIR/$j2.done"

step "Stopping spoold and watchd serve"
stop
note "demo done; the spool stays in $DEMO_DIR for a look around (make clean removes it)"
