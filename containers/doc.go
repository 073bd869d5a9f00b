// Package containers builds the lockbreaker node image, and on it the image layer of
// each system with packages of its own (etcd, PostgreSQL) when a run first needs it, and
// runs the clusters under test (single Redis, Redlock's independent Redis masters, a
// Redis primary with replicas and Sentinels, a ZooKeeper ensemble, an etcd cluster, a
// PostgreSQL server) in Docker, and gives the
// nemesis its levers on them: signals (SIGSTOP/SIGCONT), crashes and restarts
// (SIGKILL, then the same container started again on what its disk kept), clock
// offsets through libfaketime, partitions through iptables rules in the nodes'
// network namespaces (made from this host with nsenter when it runs as root with
// nsenter and iptables, else inside the nodes), and each node's role (leader, primary,
// replica...). A system described in a file (package sysfile) may run an image of its
// own with none of the node image's tools in it: see own.go. A lever's calls into the
// engine have deadlines of their own, fit for a busy engine, and are tried again when it
// does not answer; the caller's context never cuts them, so a heal runs after a run's end
// and a fault is never left half made (engine.go).
//
// Containers are created with testcontainers-go, whose Ryuk reaper is disabled
// (its image cannot be pulled where lockbreaker runs). Instead everything the
// package creates carries the label org.lockbreaker.project=1 plus the run id
// and the owner process, and is removed by [Cluster.Stop], by [Clean], or by
// [CleanStale] on the next start after a crash. Images are a cache: they carry
// the project label too but are never removed.
//
// The lock clients are host processes. They dial a node at its IP on the run's
// Docker network ([Node.Addr]) and reach it from the network's gateway address
// ([Cluster.Gateway]): dropping that address inside a node cuts every client
// off it at once. Per-client partitions would need clients with their own
// addresses and are not offered.
//
// The package prints nothing except to the progress writer given to
// [EnsureImage]. It never touches anything without the project label.
package containers
