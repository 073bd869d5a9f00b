package sysfile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
	_ "github.com/lockbreaker/lockbreaker/workloads/execlock" // the exec client, as the binary links it
)

// good is a complete system file; each bad case below breaks one thing in it.
const good = `name: myredis
about: our own Redis build
nodes: 1
port: 6379
command: [redis-server, /etc/lock/redis.conf, --port, "{{port}}"]
files:
  - path: /etc/lock/redis.conf
    content: "# node {{name}} of {{count}}, ttl {{ttl_ms}} ms\nsave \"\"\n"
ready: {send: PING, expect: +PONG}
clients: [redis]
`

func TestAGoodFileIsTheSystemItDescribes(t *testing.T) {
	sys, err := Parse([]byte(good), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if sys.Name != "myredis" || sys.DefaultClient != "redis" || sys.Sizes != (system.Sizes{Default: 1, Min: 1, Max: 1}) ||
		sys.Container == nil || sys.Container.Port != 6379 || sys.Container.Image != nil || sys.FixedClock != "" {
		t.Fatalf("got %+v", sys)
	}
	setup := sys.Container.Node(system.Cluster{Nodes: 1, TTL: 2500 * time.Millisecond}, 1)
	if want := []string{"redis-server", "/etc/lock/redis.conf", "--port", "6379"}; !slices.Equal(setup.Cmd, want) {
		t.Errorf("command %q, want %q", setup.Cmd, want)
	}
	if len(setup.Files) != 1 || setup.Files[0].Content != "# node n1 of 1, ttl 2500 ms\nsave \"\"\n" {
		t.Errorf("files %+v", setup.Files)
	}
}

// The machine key says the nodes run on machines, with their command there; without it,
// they do not. On machines, the nodes are named by their machines' hosts.
func TestAFileSaysHowItsNodesStartOnAMachine(t *testing.T) {
	sys, err := Parse([]byte(good), t.TempDir())
	if err != nil || sys.Container.OnMachine != nil {
		t.Fatalf("a file without machine: %v, %+v", err, sys.Container.OnMachine)
	}
	sys, err = Parse([]byte(good+"machine:\n  command: [/opt/lock/bin/redis-server, --port, \"{{port}}\", --replicaof, \"{{peers}}\"]\n  prepare: mkdir -p data\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	on := sys.Container.OnMachine
	cluster := system.Cluster{Nodes: 2, Hosts: []string{"a.example", "b.example"}}
	if want := []string{"/opt/lock/bin/redis-server", "--port", "6379", "--replicaof", "b.example:6379"}; on == nil || on.Prepare != "mkdir -p data" ||
		!slices.Equal(on.Cmd(cluster, 1), want) {
		t.Errorf("on a machine: %+v, command %q; want %q", on, on.Cmd(cluster, 1), want)
	}
}

func TestPlaceholdersOfAnEnsemble(t *testing.T) {
	v := Values(system.Cluster{Nodes: 3, TTL: 1500 * time.Millisecond}, 2, 2379, 2380)
	got := Expand("--name {{name}} --id {{ id }} --peers {{peers}} --all {{nodes}} --ttl {{ttl_s}}s {{nope}}", v)
	want := "--name n2 --id 2 --peers n1:2380,n3:2380 --all n1:2380,n2:2380,n3:2380 --ttl 2s {{nope}}"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// Loading a file registers nothing (the harness does, harness.CheckSpec); once its system
// is registered, every client of the systems the file names, and no other, runs on it.
func TestClientsRunOnTheSystemsTheyNameAFileSpeaks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(good, "name: myredis", "name: clients-test", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil || again.SHA256 != l.SHA256 || len(l.SHA256) != 64 {
		t.Fatalf("loading it again: %v, %s vs %s", err, again.SHA256, l.SHA256)
	}
	if _, err := system.Lookup("clients-test"); err == nil {
		t.Fatal("loading the file registered its system")
	}
	if err := system.Register(l.System); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range workloads.ForSystem("clients-test") {
		names = append(names, c.Name)
	}
	if want := []string{"exec", "redis", "redislock"}; !slices.Equal(names, want) {
		t.Errorf("clients %v, want %v", names, want)
	}
}

func TestBadFilesGetOneLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	edit := func(from, to string) string {
		if !strings.Contains(good, from) {
			t.Fatalf("the good file has no %q", from)
		}
		return strings.Replace(good, from, to, 1)
	}
	tests := []struct {
		name, file, want string
	}{
		{"not yaml", "name: [x", "not YAML"},
		{"not a mapping", "- a\n- b\n", "not a mapping"},
		{"empty", "", "empty: a system file needs"},
		{"unknown key", good + "replicas: 3\n", `unknown key "replicas"`},
		{"typo of a key", edit("port:", "prot:"), `unknown key "prot"`},
		{"no name", edit("name: myredis\n", ""), "no name"},
		{"a name no directory takes", edit("name: myredis", "name: My/Redis"), `name "My/Redis": want a lower-case word`},
		{"a built-in name", edit("name: myredis", "name: redis"), `name "redis" is a built-in system's`},
		{"no nodes", edit("nodes: 1\n", ""), "no nodes"},
		{"sizes out of order", edit("nodes: 1", "nodes: {default: 3, min: 5, max: 3}"), "min 5 and max 3 must be within 1 to 9"},
		{"default outside the sizes", edit("nodes: 1", "nodes: {default: 7, min: 1, max: 5}"), "the default, 7, is not within"},
		{"even default of odd sizes", edit("nodes: 1", "nodes: {default: 4, min: 3, max: 9, odd: true}"), "odd sizes only"},
		{"too many nodes", edit("nodes: 1", "nodes: 12"), "within 1 to 9"},
		{"unknown size key", edit("nodes: 1", "nodes: {default: 1, most: 3}"), `unknown field "most"`},
		{"no port", edit("port: 6379\n", ""), "port: want the server's port"},
		{"port out of range", edit("port: 6379", "port: 70000"), "port: want the server's port"},
		{"port not a number", edit("port: 6379", "port: six"), "port: want int"},
		{"no command", edit(`command: [redis-server, /etc/lock/redis.conf, --port, "{{port}}"]`+"\n", ""), "no command"},
		{"unknown placeholder", edit(`"{{port}}"`, `"{{prot}}"`), "unknown placeholder {{prot}}"},
		{"unclosed placeholder", edit(`"{{port}}"`, `"{{port"`), "a {{ without its }}"},
		{"relative file path", edit("path: /etc/lock/redis.conf", "path: redis.conf"), "must be a clean absolute path"},
		{"no ready", edit("ready: {send: PING, expect: +PONG}\n", ""), "no ready"},
		{"two ways to be ready", edit("ready: {send: PING, expect: +PONG}", "ready: {tcp: true, send: PING, expect: +PONG}"), "exactly one of tcp, command"},
		{"send without expect", edit("ready: {send: PING, expect: +PONG}", "ready: {send: PING}"), "send and expect go together"},
		{"no clients", edit("clients: [redis]\n", ""), "no clients"},
		{"a client that does not exist", edit("clients: [redis]", "clients: [redis, jedis]"), `"jedis" is neither a built-in system`},
		{"a system whose clients need monitors", edit("clients: [redis]", "clients: [sentinel]"), "monitors beside the nodes"},
		{"image and packages", good + "image: myorg/lockd:1.4\npackages: [redis-server]\n", "the software comes from one place"},
		{"not an image reference", good + "image: 'My Image'\n", `image "My Image": not an image reference`},
		{"not a package name", good + "packages: ['redis; rm -rf /']\n", "is not a Debian package name"},
		{"a copied file that is not there", good + "copy: [{from: ./lockd, to: /usr/local/bin/lockd}]\n", `copy: "./lockd": no such file`},
		{"a copied directory", good + "copy: [{from: adir, to: /usr/local/bin/lockd}]\n", "is not a regular file"},
		{"copied to a relative path", good + "copy: [{from: notes.txt, to: bin/lockd}]\n", "must be a clean absolute path"},
		{"a mode that is not octal", good + "copy: [{from: notes.txt, to: /bin/lockd, mode: rwx}]\n", "want octal permissions"},
		{"a leader without a role probe", good + "leader: true\n", "needs a role probe"},
		{"a role probe without a command", good + "role: {}\n", "role: needs a command"},
		{"a crash line without a line", good + "crash: {send: ''}\n", "crash: send is the one line"},
		{"a machine command without a program", good + "machine: {command: ['', x]}\n", "machine: command's first word is the program"},
		{"a machine command with a typo", good + "machine: {command: [lockd, '{{prot}}']}\n", "unknown placeholder {{prot}}"},
		{"an image's own command on a machine", "name: lockd\nnodes: 1\nport: 7070\nimage: myorg/lockd:1.4\nready: {tcp: true}\n" +
			"clients: [exec]\nmachine: {}\n", "machine: the image's own command does not start on a machine"},
		{"a machine key that is not known", good + "machine: {cmd: [lockd]}\n", `machine: unknown key "cmd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file), dir)
			switch {
			case err == nil:
				t.Fatalf("accepted; want an error containing %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Fatalf("got %q, want it to contain %q", err, tt.want)
			case strings.Contains(err.Error(), "\n"):
				t.Fatalf("more than one line: %q", err)
			}
		})
	}
}

// A copied program libfaketime cannot reach refuses clock faults with the reason: this
// test's own binary is a Go program.
func TestACopiedGoProgramsClockIsFixed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Replace(good, "command: [redis-server,", "command: [/usr/local/bin/lockd,", 1) +
		"copy: [{from: " + self + ", to: /usr/local/bin/lockd}]\n"
	sys, err := Parse([]byte(f), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sys.FixedClock, "/usr/local/bin/lockd is a Go program") {
		t.Fatalf("fixed clock %q", sys.FixedClock)
	}
	if img := sys.Container.Image; img == nil || len(img.Copy) != 1 || img.Copy[0].Mode != 0o755 || !filepath.IsAbs(img.Copy[0].From) {
		t.Fatalf("image %+v", img)
	}
}

func TestLineReadyProbe(t *testing.T) {
	probe := system.LineReady("PING", "+PONG")
	if err := probe(context.Background(), "127.0.0.1:1"); err == nil {
		t.Fatal("a closed port is ready")
	}
}
