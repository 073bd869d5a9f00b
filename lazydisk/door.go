package lazydisk

import (
	"context"
	"sync"
	"syscall"
)

// door holds back every open of a file while it is shut: a server crashed in place and
// starting again reads nothing of its disk before a power loss has dropped what the disk
// held, however soon it starts.
type door struct {
	mu   sync.Mutex
	shut chan struct{} // closed when the door opens; nil while it is open
}

// wait returns once the door is open, or with EINTR when the caller gave up (ctx is the
// request's, cancelled by the kernel's interrupt).
func (d *door) wait(ctx context.Context) syscall.Errno {
	d.mu.Lock()
	shut := d.shut
	d.mu.Unlock()
	if shut == nil {
		return 0
	}
	select {
	case <-shut:
		return 0
	case <-ctx.Done():
		return syscall.EINTR
	}
}

func (d *door) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shut == nil {
		d.shut = make(chan struct{})
	}
}

func (d *door) open() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shut != nil {
		close(d.shut)
		d.shut = nil
	}
}
