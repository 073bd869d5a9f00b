// Package async runs a function in a goroutine of its own for a caller that waits for it,
// and carries a panic in it to the caller. A panic left in its own goroutine ends the
// process past every recover, the CLI's too, which makes a bug one line and exit 255.
package async

// Task is a function running in a goroutine of its own.
type Task struct {
	done     chan struct{}
	panicked any // what the function panicked with; nil while it has not
}

// Go runs f in a goroutine of its own.
func Go(f func()) *Task {
	t := &Task{done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer func() { t.panicked = recover() }()
		f()
	}()
	return t
}

// Wait waits for the function to end, and panics with what it panicked with, if it did,
// every time it is called.
func (t *Task) Wait() {
	<-t.done
	if t.panicked != nil {
		panic(t.panicked)
	}
}
