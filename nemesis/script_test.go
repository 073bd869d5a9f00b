package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

func TestAWrittenScheduleStrikesItsTargetsAtItsMomentsForItsLengths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(3, 3)
		env := f.env()
		env.Script = map[string][]Shot{history.PauseNode.Name: {
			{At: 100 * time.Millisecond, Target: 1, For: 50 * time.Millisecond},
			{At: 120 * time.Millisecond, Target: 5, For: 20 * time.Millisecond}, // due while the first lasts: after it
		}}
		n, err := New([]string{history.PauseNode.Name})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := n.Run(context.Background(), env); err != nil { // a written schedule ends with its last step
			t.Fatal(err)
		}
		if took := time.Since(began); took != 170*time.Millisecond {
			t.Errorf("the schedule took %s, want 170ms: 100ms, 50ms of the first pause, 20ms of the second", took)
		}
		got := f.did()
		if want := []string{"n2 SIGSTOP", "n2 SIGCONT", "n3 SIGSTOP", "n3 SIGCONT"}; !slices.Equal(got, want) {
			t.Errorf("actions %q, want %q (target 5 of 3 nodes is the third)", got, want)
		}
	})
}

func TestAWrittenScheduleThatNamesAKindNotMakesNoneOfItsFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(3, 3)
		env := f.env()
		env.Script = map[string][]Shot{history.PauseNode.Name: {{At: time.Millisecond, Target: 0, For: time.Millisecond}}}
		n, _ := New([]string{history.PauseClient.Name})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := n.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		if faults := f.faults(); len(faults) != 0 {
			t.Errorf("faults %+v, want none: the schedule has no step of pause-client", faults)
		}
	})
}

func TestScriptedNamesTheKindsThatFollowASchedule(t *testing.T) {
	got := Scripted()
	for _, name := range []string{history.PauseClient.Name, history.PauseNode.Name, history.Delay.Name, history.DelayExtend.Name, history.KillClient.Name} {
		if !slices.Contains(got, name) {
			t.Errorf("Scripted() = %q, lacks %s", got, name)
		}
	}
	if slices.Contains(got, history.PauseHolder.Name) {
		t.Errorf("Scripted() = %q: pause-holder waits for a reader, it follows no schedule", got)
	}
}

// A shot with a state waits past its moment for a client in that state and picks its target
// among those; one that holds on lasts past its length until another client took the lock
// over (granted, then used the storage).
func TestAWrittenShotWaitsForItsStateAndHoldsOnUntilATakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(3, 1)
		env := f.env()
		env.TTL = time.Second
		env.Script = map[string][]Shot{history.PauseClient.Name: {{At: 10 * time.Millisecond, Target: 0, For: 100 * time.Millisecond, When: history.Waiting, HoldOn: true}}}
		n, _ := New([]string{history.PauseClient.Name})
		stop := func(p int) string { return fmt.Sprintf("worker-%d %s", p, strings.ToUpper(syscall.SIGSTOP.String())) }
		cont := func(p int) string { return fmt.Sprintf("worker-%d %s", p, strings.ToUpper(syscall.SIGCONT.String())) }
		done := make(chan error, 1)
		go func() { done <- n.Run(context.Background(), env) }()
		send := func(p int, fn history.Func, ty history.Type) {
			f.events <- history.Event{Process: p, Func: fn, Type: ty}
		}
		send(0, history.Acquire, history.Invoke)
		send(0, history.Acquire, history.OK) // p0 holds
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if got := f.did(); len(got) != 0 {
			t.Fatalf("actions %q before any client waited", got)
		}
		send(2, history.Acquire, history.Invoke)
		synctest.Wait()
		if got, want := f.did(), []string{stop(2)}; !slices.Equal(got, want) {
			t.Fatalf("actions %q, want %q: target 0 among the waiting is p2", got, want)
		}
		time.Sleep(200 * time.Millisecond) // past its length: it holds on
		send(0, history.Release, history.Invoke)
		send(1, history.Acquire, history.Invoke)
		send(1, history.Acquire, history.OK)
		synctest.Wait()
		if got := f.did(); len(got) != 1 {
			t.Fatalf("actions %q: thawed at a grant, before the new holder used the storage", got)
		}
		send(1, history.Read, history.OK)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, want := f.did(), []string{stop(2), cont(2)}; !slices.Equal(got, want) {
			t.Errorf("actions %q, want %q", got, want)
		}
	})
}
