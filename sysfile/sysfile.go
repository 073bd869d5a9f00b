// Package sysfile reads a system file: a lock service described as data, with the same
// meaning as a system.System descriptor, so a team can put its own service (its binary,
// its build of Redis, its image) under every fault without writing Go:
//
//	name: myredis                      # a word; not a built-in system's name
//	about: our Redis build             # optional, one line
//	nodes: 1                           # or {default: 3, min: 3, max: 9, odd: true}
//	port: 6379                         # the client port inside the container
//	peer_port: 7000                    # optional: the port {{peers}} name (default: port)
//	command: [redis-server, /etc/lock.conf, --port, "{{port}}"]
//	files:                             # optional, written before the node starts
//	  - {path: /etc/lock.conf, content: "appendonly no\n"}
//	ready: {tcp: true}                 # or {command: [...]} run in the node,
//	                                   # or {send: PING, expect: +PONG}
//	role: {command: [lockctl, role]}   # optional; its output's first word is the role
//	crash: {send: "DEBUG CRASH-AND-RECOVER 0"}  # optional: a line that makes the server
//	                                   # crash and restart in place; else a crash kills
//	                                   # the container and starts it again
//	leader: false                      # optional; true needs role
//	fixed_clock: ""                    # optional: why its clock cannot be moved
//	clients: [redis]                   # built-in systems whose clients speak to it,
//	                                   # clients by name, or exec
//	# where the software comes from, one of:
//	packages: [redis-server]           # Debian packages in a layer on the node image,
//	prepare: "mkdir -p /var/lib/lock"  #   and a script run once they are in (optional)
//	copy: [{from: ./lockd, to: /usr/local/bin/lockd}]  # files of this machine in such a layer
//	image: myorg/lockd:1.4             # or an image the engine already has, run as it is
//	machine:                           # optional: the nodes run on machines too (--nodes-file)
//	  command: [/opt/lockd/bin/lockd, --port, "{{port}}"]  # optional: the command there
//	  prepare: "mkdir -p data"         # optional: run in the node's directory first
//
// Neither packages, copy nor image: the nodes run the node image itself. Command words,
// file paths and file contents may hold placeholders: {{id}} (1..N), {{name}} (n1..nN,
// also the node's host name on the cluster network), {{count}} (N), {{port}},
// {{peer_port}}, {{nodes}} and {{peers}} (every node's, or every other node's,
// name:peer_port, comma-separated), {{ttl_ms}} and {{ttl_s}} (the lock's TTL, whole
// seconds rounded up). A path in copy's from is relative to the system file's directory.
// On a machine, {{nodes}} and {{peers}} name the machines' hosts, and every path files and
// copy write (and the words that name it) moves under the node's own directory there.
//
// Everything is checked when the file is read, before any container starts; what only the
// engine can tell (a missing image, a clock libfaketime cannot move in it) is checked by
// package containers, also before. The package touches no Docker.
package sysfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockbreaker/lockbreaker/internal/clockable"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// ExecClient is the exec client's name (package execlock, which imports this package's
// importers and so cannot be imported here).
const ExecClient = "exec"

// file is a system file as written: the keys above.
type file struct {
	Name       string          `json:"name"`
	About      string          `json:"about"`
	Nodes      json.RawMessage `json:"nodes"`
	Port       int             `json:"port"`
	PeerPort   int             `json:"peer_port"`
	Command    []string        `json:"command"`
	Files      []fileEntry     `json:"files"`
	Ready      *ready          `json:"ready"`
	Role       *role           `json:"role"`
	Crash      *crash          `json:"crash"`
	Leader     bool            `json:"leader"`
	FixedClock string          `json:"fixed_clock"`
	Clients    []string        `json:"clients"`
	Packages   []string        `json:"packages"`
	Prepare    string          `json:"prepare"`
	Copy       []copyEntry     `json:"copy"`
	Image      string          `json:"image"`
	Machine    json.RawMessage `json:"machine"` // a machine, read by onMachine
}

// machine says how a node starts on a machine (package machines) where that differs from
// its container.
type machine struct {
	Command []string `json:"command"`
	Prepare string   `json:"prepare"`
}

type fileEntry struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type ready struct {
	TCP     bool     `json:"tcp"`
	Command []string `json:"command"`
	Send    string   `json:"send"`
	Expect  string   `json:"expect"`
}

type role struct {
	Command []string `json:"command"`
}

type crash struct {
	Send string `json:"send"`
}

type copyEntry struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Mode is octal text ("0755"); default 0755, as a program's.
	Mode string `json:"mode"`
}

type sizes struct {
	Default int  `json:"default"`
	Min     int  `json:"min"`
	Max     int  `json:"max"`
	Odd     bool `json:"odd"`
}

// maxSize bounds a system file; its files' contents are in it.
const maxSize = 1 << 20

// maxNodes is the most nodes a system file may ask for, as for the built-in systems.
const maxNodes = 9

// Loaded is a system file read and checked. Its system is not registered: the harness
// registers it (harness.CheckSpec), so that loading a file changes nothing else.
type Loaded struct {
	System system.System
	// SHA256 is the hex sha256 of the file's bytes: results and the suite matrix show it,
	// so a run says which description of the service it tested.
	SHA256 string
}

// Load reads the system file at path and checks it. It registers nothing: Load has no
// effect but reading the file and the files its copy key names.
func Load(filePath string) (Loaded, error) {
	info, err := os.Stat(filePath)
	if err != nil {
		return Loaded{}, fmt.Errorf("system file: %w", err)
	}
	if info.Size() > maxSize {
		return Loaded{}, fmt.Errorf("system file %s: %d bytes, more than %d", filePath, info.Size(), maxSize)
	}
	data, err := os.ReadFile(filePath)
	if err != nil {
		return Loaded{}, fmt.Errorf("system file: %w", err)
	}
	sum := sha256.Sum256(data)
	sys, err := Parse(data, filepath.Dir(filePath))
	if err != nil {
		return Loaded{}, fmt.Errorf("system file %s: %w", filePath, err)
	}
	return Loaded{System: sys, SHA256: hex.EncodeToString(sum[:])}, nil
}

var (
	namePattern    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	packagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`) // Debian policy's package names
	// imagePattern is a reference the engine takes: a repository, a tag or digest optional.
	imagePattern       = regexp.MustCompile(`^[a-z0-9]+([._/-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)
	placeholderPattern = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
)

// placeholders are the names a command, a file's path or its content may use.
var placeholders = []string{"id", "name", "count", "port", "peer_port", "nodes", "peers", "ttl_ms", "ttl_s"}

// Parse checks a system file's text and returns its system. dir is the
// file's directory, from which copy's paths are read. It reads the files copy names (they
// must exist) and nothing else.
func Parse(data []byte, dir string) (system.System, error) {
	f, err := decode(data)
	if err != nil {
		return system.System{}, err
	}
	sz, err := f.sizes()
	if err != nil {
		return system.System{}, err
	}
	sys := system.System{Name: f.Name, About: f.About, Sizes: system.Sizes{Default: sz.Default, Min: sz.Min, Max: sz.Max, Odd: sz.Odd},
		Leader: f.Leader, FixedClock: f.FixedClock}
	if sys.About == "" {
		sys.About = "a lock service described in a system file"
	}
	if sys.DefaultClient, sys.Speaks, err = f.clients(); err != nil {
		return system.System{}, err
	}
	img, err := f.image(dir)
	if err != nil {
		return system.System{}, err
	}
	if err := f.checkNode(img); err != nil {
		return system.System{}, err
	}
	c := &system.Container{Port: f.Port, Image: img}
	peerPort := f.PeerPort
	if peerPort == 0 {
		peerPort = f.Port
	} else if peerPort != f.Port {
		c.PeerPorts = []int{peerPort}
	}
	command, files := slices.Clone(f.Command), slices.Clone(f.Files)
	c.Node = func(cluster system.Cluster, id int) system.NodeSetup {
		values := Values(cluster, id, f.Port, peerPort)
		setup := system.NodeSetup{Cmd: expandAll(command, values)}
		for _, fe := range files {
			setup.Files = append(setup.Files, system.File{Path: Expand(fe.Path, values), Content: Expand(fe.Content, values)})
		}
		return setup
	}
	switch r := f.Ready; {
	case r.TCP:
		c.Ready = system.TCPReady
	case len(r.Command) > 0:
		c.ReadyIn = slices.Clone(r.Command)
		c.Ready = system.TCPReady // not asked: ReadyIn is
	default:
		c.Ready = system.LineReady(r.Send, r.Expect)
	}
	if f.Role != nil {
		c.RoleIn = slices.Clone(f.Role.Command)
	}
	if f.Crash != nil {
		c.Crash = system.LineCrash(f.Crash.Send)
	}
	m, err := f.onMachine(f.Image != "" && len(f.Command) == 0)
	if err != nil {
		return system.System{}, err
	}
	if m != nil {
		c.OnMachine = &system.OnMachine{Prepare: m.Prepare}
		if len(m.Command) > 0 {
			words := slices.Clone(m.Command)
			c.OnMachine.Cmd = func(cluster system.Cluster, id int) []string {
				return expandAll(words, Values(cluster, id, f.Port, peerPort))
			}
		}
	}
	sys.Container = c
	if sys.FixedClock == "" {
		sys.FixedClock = f.copiedClock(img)
	}
	return sys, nil
}

// decode reads the YAML (or JSON) into a file, refusing unknown keys.
func decode(data []byte) (file, error) {
	var f file
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return f, fmt.Errorf("not YAML: %s", firstLine(err.Error()))
	}
	if doc == nil {
		return f, errors.New("empty: a system file needs at least name, nodes, port, command (or image), ready and clients")
	}
	if _, ok := doc.(map[string]any); !ok {
		return f, errors.New("not a mapping of keys to values")
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return f, fmt.Errorf("keys must be words: %s", firstLine(err.Error()))
	}
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, jsonError(err)
	}
	return f, nil
}

// jsonError rephrases the decoder's errors in the file's terms.
func jsonError(err error) error {
	msg := err.Error()
	if key, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown key %s (known: %s)", key, strings.Join(knownKeys(), ", "))
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Errorf("%s: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

func knownKeys() []string {
	return []string{"name", "about", "nodes", "port", "peer_port", "command", "files", "ready", "role", "crash", "leader",
		"fixed_clock", "clients", "packages", "prepare", "copy", "image", "machine"}
}

func firstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }

// sizes reads nodes: a number (that size only) or {default, min, max, odd}, and checks
// the rule.
func (f file) sizes() (sizes, error) {
	if f.Name == "" {
		return sizes{}, errors.New("no name: every system file names its system")
	}
	if !namePattern.MatchString(f.Name) {
		return sizes{}, fmt.Errorf("name %s: want a lower-case word of letters, digits and -, at most 40", quote.Short(f.Name))
	}
	if system.BuiltIn(f.Name) {
		return sizes{}, fmt.Errorf("name %s is a built-in system's: give yours a name of its own", quote.Short(f.Name))
	}
	var sz sizes
	switch raw := bytes.TrimSpace(f.Nodes); {
	case len(raw) == 0 || string(raw) == "null":
		return sz, errors.New("no nodes: give a size (nodes: 1) or sizes (nodes: {default: 3, min: 3, max: 5, odd: true})")
	case raw[0] == '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sz); err != nil {
			return sz, fmt.Errorf("nodes: %v (want default, min, max, odd)", strings.TrimPrefix(err.Error(), "json: "))
		}
	default:
		n, err := strconv.Atoi(string(raw))
		if err != nil {
			return sz, fmt.Errorf("nodes: want a number or {default, min, max, odd}, got %s", quote.Short(string(raw)))
		}
		sz = sizes{Default: n, Min: n, Max: n}
	}
	if sz.Min == 0 {
		sz.Min = 1
	}
	if sz.Max == 0 {
		sz.Max = max(sz.Min, sz.Default)
	}
	if sz.Default == 0 {
		sz.Default = sz.Min
	}
	switch {
	case sz.Min < 1 || sz.Max > maxNodes || sz.Min > sz.Max:
		return sz, fmt.Errorf("nodes: min %d and max %d must be within 1 to %d, min at most max", sz.Min, sz.Max, maxNodes)
	case sz.Default < sz.Min || sz.Default > sz.Max:
		return sz, fmt.Errorf("nodes: the default, %d, is not within min %d and max %d", sz.Default, sz.Min, sz.Max)
	case sz.Odd && (sz.Default%2 == 0 || sz.Min == sz.Max && sz.Min%2 == 0):
		return sz, fmt.Errorf("nodes: odd sizes only, but the default is %d", sz.Default)
	}
	return sz, nil
}

// clients checks clients: each word a built-in system (all of whose clients then apply),
// a client's name, or exec. The default client is the first word's first client.
func (f file) clients() (string, []string, error) {
	if len(f.Clients) == 0 {
		return "", nil, errors.New("no clients: say which lock clients speak to it (clients: [redis] for a Redis-compatible server, clients: [exec] for a program of yours)")
	}
	var speaks []string
	defaultClient := ""
	for _, w := range f.Clients {
		var first string
		switch {
		case w == ExecClient:
			first = ExecClient
		case system.BuiltIn(w):
			sys, _ := system.Lookup(w)
			if sys.InProcess != nil || sys.Container != nil && sys.Container.Monitors != nil {
				return "", nil, fmt.Errorf("clients: %s's clients need what a system file cannot describe (%s)", w, monitorsOrHarness(sys))
			}
			first = sys.DefaultClient
		default:
			c, err := workloads.LookupClient(w)
			if err != nil {
				return "", nil, fmt.Errorf("clients: %s is neither a built-in system (%s), a client nor exec", quote.Short(w), strings.Join(builtIns(), ", "))
			}
			first = c.Name
		}
		if slices.Contains(speaks, w) {
			return "", nil, fmt.Errorf("clients: %s twice", quote.Short(w))
		}
		speaks = append(speaks, w)
		if defaultClient == "" {
			defaultClient = first
		}
	}
	return defaultClient, speaks, nil
}

func monitorsOrHarness(sys system.System) string {
	if sys.InProcess != nil {
		return "it is served by the harness"
	}
	return "monitors beside the nodes"
}

func builtIns() []string {
	var names []string
	for _, n := range system.Names() {
		if system.BuiltIn(n) {
			names = append(names, n)
		}
	}
	return names
}

// image checks where the software comes from: a local image, or a layer of packages and
// copied files on the node image, or the node image itself (nil).
func (f file) image(dir string) (*system.Image, error) {
	layer := len(f.Packages) > 0 || len(f.Copy) > 0 || f.Prepare != ""
	switch {
	case f.Image != "" && layer:
		return nil, errors.New("image and packages, prepare or copy: the software comes from one place (an image of yours, or a layer on the node image)")
	case f.Image != "":
		if !imagePattern.MatchString(f.Image) {
			return nil, fmt.Errorf("image %s: not an image reference (name:tag)", quote.Short(f.Image))
		}
		return &system.Image{Local: f.Image}, nil
	case !layer:
		return nil, nil
	}
	img := &system.Image{Prepare: f.Prepare}
	for _, p := range f.Packages {
		if !packagePattern.MatchString(p) {
			return nil, fmt.Errorf("packages: %s is not a Debian package name", quote.Short(p))
		}
		img.Packages = append(img.Packages, p)
	}
	for _, c := range f.Copy {
		if c.From == "" || c.To == "" {
			return nil, errors.New("copy: each entry needs from (a file here) and to (an absolute path in the image)")
		}
		if !path.IsAbs(c.To) || path.Clean(c.To) != c.To || c.To == "/" {
			return nil, fmt.Errorf("copy: to %s must be a clean absolute path in the image", quote.Short(c.To))
		}
		from := c.From
		if !filepath.IsAbs(from) {
			from = filepath.Join(dir, from)
		}
		from, err := filepath.Abs(from)
		if err != nil {
			return nil, fmt.Errorf("copy: %w", err)
		}
		info, err := os.Stat(from)
		switch {
		case err != nil:
			return nil, fmt.Errorf("copy: %s: %v", quote.Short(c.From), errors.Unwrap(err))
		case !info.Mode().IsRegular():
			return nil, fmt.Errorf("copy: %s is not a regular file", quote.Short(c.From))
		}
		mode := int64(0o755)
		if c.Mode != "" {
			m, err := strconv.ParseInt(c.Mode, 8, 32)
			if err != nil || m < 0 || m > 0o7777 {
				return nil, fmt.Errorf("copy: mode %s: want octal permissions such as \"0755\"", quote.Short(c.Mode))
			}
			mode = m
		}
		img.Copy = append(img.Copy, system.CopyFile{From: from, To: c.To, Mode: mode})
	}
	return img, nil
}

// checkNode checks the node's recipe: port, command, files, placeholders, readiness, role.
func (f file) checkNode(img *system.Image) error {
	for _, p := range []struct {
		key  string
		port int
	}{{"port", f.Port}, {"peer_port", f.PeerPort}} {
		if p.port < 0 || p.port > 65535 || p.port == 0 && p.key == "port" {
			return fmt.Errorf("%s: want the server's port inside the container, 1 to 65535, got %d", p.key, p.port)
		}
	}
	local := img != nil && img.Local != ""
	switch {
	case len(f.Command) == 0 && !local:
		return errors.New("no command: how does a node start? (command: [program, args...])")
	case len(f.Command) > 0 && f.Command[0] == "":
		return errors.New("command: the first word is the program, and it is empty")
	}
	for _, w := range f.Command {
		if err := checkPlaceholders("command", w); err != nil {
			return err
		}
	}
	for _, fe := range f.Files {
		if !path.IsAbs(fe.Path) || path.Clean(fe.Path) != fe.Path {
			return fmt.Errorf("files: path %s must be a clean absolute path in the container", quote.Short(fe.Path))
		}
		for _, s := range []string{fe.Path, fe.Content} {
			if err := checkPlaceholders("files", s); err != nil {
				return err
			}
		}
	}
	switch r := f.Ready; {
	case r == nil:
		return errors.New("no ready: how to tell a node serves? ({tcp: true}, {command: [...]}, or {send: PING, expect: +PONG})")
	case btoi(r.TCP)+btoi(len(r.Command) > 0)+btoi(r.Send != "" || r.Expect != "") != 1:
		return errors.New("ready: exactly one of tcp, command, or send with expect")
	case (r.Send != "") != (r.Expect != ""):
		return errors.New("ready: send and expect go together")
	case strings.ContainsAny(r.Send, "\r\n"):
		return errors.New("ready: send is one line (a newline is added)")
	}
	switch {
	case f.Crash != nil && (f.Crash.Send == "" || strings.ContainsAny(f.Crash.Send, "\r\n")):
		return errors.New("crash: send is the one line that makes the server crash and start again in place")
	case f.Role != nil && len(f.Role.Command) == 0:
		return errors.New("role: needs a command whose output names the node's role")
	case f.Leader && f.Role == nil:
		return errors.New("leader: true needs a role probe (role: {command: [...]}) to find the leader")
	}
	return nil
}

// onMachine reads and checks the machine key: nil without one; its command words with
// known placeholders, and a command at all when the container's is its image's own
// (imageCommand).
func (f file) onMachine(imageCommand bool) (*machine, error) {
	if raw := bytes.TrimSpace(f.Machine); len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m machine
	dec := json.NewDecoder(bytes.NewReader(f.Machine))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("machine: unknown key %s (known: command, prepare)", key)
		}
		return nil, fmt.Errorf("machine: %v", jsonError(err))
	}
	switch {
	case len(m.Command) > 0 && m.Command[0] == "":
		return nil, errors.New("machine: command's first word is the program, and it is empty")
	case len(m.Command) == 0 && imageCommand:
		return nil, errors.New("machine: the image's own command does not start on a machine: give machine's command")
	}
	for _, w := range m.Command {
		if err := checkPlaceholders("machine", w); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkPlaceholders refuses an unknown or unclosed placeholder in s.
func checkPlaceholders(key, s string) error {
	for _, m := range placeholderPattern.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(placeholders, m[1]) {
			return fmt.Errorf("%s: unknown placeholder {{%s}} (known: %s)", key, m[1], "{{"+strings.Join(placeholders, "}}, {{")+"}}")
		}
	}
	if rest := placeholderPattern.ReplaceAllString(s, ""); strings.Contains(rest, "{{") {
		return fmt.Errorf("%s: a {{ without its }} in %s", key, quote.Short(s))
	}
	return nil
}

// copiedClock says why the node's clock cannot be moved when its program is a file this
// machine copies in and libfaketime cannot be preloaded into it (a static binary, a Go
// program, musl); "" otherwise, or when the program is not one of those files.
func (f file) copiedClock(img *system.Image) string {
	if img == nil || len(f.Command) == 0 {
		return ""
	}
	for _, c := range img.Copy {
		if c.To != f.Command[0] {
			continue
		}
		b, err := os.ReadFile(c.From)
		if err != nil {
			return ""
		}
		return clockable.Why(f.Command[0], b)
	}
	return ""
}

// Values are the placeholders' values for node id of cluster.
func Values(cluster system.Cluster, id, port, peerPort int) map[string]string {
	var all, peers []string
	for i := 1; i <= cluster.Nodes; i++ {
		addr := fmt.Sprintf("%s:%d", cluster.Host(i), peerPort)
		all = append(all, addr)
		if i != id {
			peers = append(peers, addr)
		}
	}
	ttlS := int64((cluster.TTL + time.Second - 1) / time.Second)
	return map[string]string{
		"id": strconv.Itoa(id), "name": fmt.Sprintf("n%d", id), "count": strconv.Itoa(cluster.Nodes),
		"port": strconv.Itoa(port), "peer_port": strconv.Itoa(peerPort),
		"nodes": strings.Join(all, ","), "peers": strings.Join(peers, ","),
		"ttl_ms": strconv.FormatInt(cluster.TTL.Milliseconds(), 10), "ttl_s": strconv.FormatInt(max(1, ttlS), 10),
	}
}

// expandAll is words with their placeholders replaced by their values.
func expandAll(words []string, values map[string]string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Expand(w, values)
	}
	return out
}

// Expand replaces the placeholders in s with their values.
func Expand(s string, values map[string]string) string {
	return placeholderPattern.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholderPattern.FindStringSubmatch(m)[1]
		if v, ok := values[name]; ok {
			return v
		}
		return m
	})
}
