package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
)

// xss runs script if any page puts it into the DOM as markup rather than text.
const xss = `"><img src=x onerror=window.__xss=1>`

// A history full of hostile strings is checked, then every page the check wrote (the
// report and porcupine's visualisations) is opened in headless Chromium, and every
// operation of porcupine's diagram is hovered so its tooltip is drawn: no script may run,
// and the hostile text must be shown as text.
func TestHostileHistoryRunsNoScriptInABrowser(t *testing.T) {
	browser := newBrowser(t)
	dir := t.TempDir()
	writeHostileHistory(t, filepath.Join(dir, "history.jsonl"))
	if code, _, stderr := lockbreaker(t, nil, "check", dir); code != command.ExitInvalid {
		t.Fatalf("check: exit %d, want %d (a violated history): %s", code, command.ExitInvalid, stderr)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	if len(pages) < 3 {
		t.Fatalf("pages %q: want the report and a visualisation per porcupine checker", pages)
	}

	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			ctx := newTab(t, browser)
			err := chromedp.Do(ctx,
				chromedp.Navigate((&url.URL{Scheme: "file", Path: page}).String()),
				chromedp.WaitReady("body"))
			if err != nil {
				t.Fatal(err)
			}
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](hoverEveryOperation))
			if err != nil {
				t.Fatal(err)
			}
			ran, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss === 1`))
			if err != nil {
				t.Fatal(err)
			}
			images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
			if err != nil {
				t.Fatal(err)
			}
			if ran || images > 0 {
				t.Errorf("a hostile string ran as markup: script ran %v, %d img elements", ran, images)
			}
			if strings.HasSuffix(page, "report.html") {
				return
			}
			if !strings.Contains(strings.Join(shown, "\n"), "onerror=window.__xss=1") {
				t.Errorf("no tooltip showed the hostile message as text; tooltips:\n%s", strings.Join(shown, "\n"))
			}
			// Times read as the report's: seconds since the history's first event.
			if tips := strings.Join(shown, "\n"); !strings.Contains(tips, "Return: t=0.001000s") || !strings.Contains(tips, "t=0s .. t=1ms") {
				t.Errorf("tooltips do not give times in seconds from the start:\n%s", tips)
			}
		})
	}
}

// newBrowser starts headless Chromium for the test; each page gets its own tab (newTab).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (make test installs it): ", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox)
	alloc, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	browser, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatal(err)
	}
	return browser
}

// newTab opens a tab that closes when the test ends and gives up after a minute.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hoverEveryOperation moves the mouse over every operation of porcupine's diagram, as a
// reader does, and returns the text of each tooltip drawn.
const hoverEveryOperation = `(() => {
	const shown = [];
	for (const el of document.querySelectorAll("[data-index]")) {
		el.dispatchEvent(new MouseEvent("mouseover", {bubbles: true, clientX: 10, clientY: 10}));
		el.dispatchEvent(new MouseEvent("mousemove", {bubbles: true, clientX: 10, clientY: 10}));
		const tip = document.querySelector(".tooltip");
		if (tip) shown.push(tip.textContent);
		el.dispatchEvent(new MouseEvent("mouseout", {bubbles: true}));
	}
	return shown;
})()`

// writeHostileHistory writes Kleppmann's paused holder, with hostile strings in every free
// text field the checkers pass on: the key, errors, the fault and its targets.
func writeHostileHistory(t *testing.T, path string) {
	t.Helper()
	type event map[string]any
	key := "k" + xss
	fault := event{"type": "info", "process": -1, "fault": "pause" + xss, "targets": []string{"worker0" + xss}}
	events := []event{
		{"type": "invoke", "process": 0, "f": "acquire", "key": key},
		{"type": "ok", "process": 0, "f": "acquire", "key": key, "message": xss},
		{"type": "invoke", "process": 0, "f": "read", "key": key},
		{"type": "ok", "process": 0, "f": "read", "key": key, "value": 0},
		merge(fault, event{"f": "start"}),
		{"type": "invoke", "process": 1, "f": "acquire", "key": key},
		{"type": "ok", "process": 1, "f": "acquire", "key": key, "message": xss},
		{"type": "invoke", "process": 1, "f": "write", "key": key, "value": 1},
		{"type": "ok", "process": 1, "f": "write", "key": key},
		merge(fault, event{"f": "stop"}),
		{"type": "invoke", "process": 0, "f": "write", "key": key, "value": 1},
		{"type": "ok", "process": 0, "f": "write", "key": key, "message": xss},
		{"type": "invoke", "process": -2, "f": "final-read", "key": key},
		{"type": "ok", "process": -2, "f": "final-read", "key": key, "value": 1},
	}
	var lines []string
	for i, e := range events {
		e["index"], e["time"] = i, 1_000_000_000+int64(i)*1_000_000
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// A violated run's report, opened through lockbreaker serve as a reader would (from the
// store's index): a verdict row per checker, the first violation highlighted in the
// timeline when its link is followed, a lane per client, and no console errors. The
// screenshot is saved next to the report (report.png); LOCKBREAKER_TEST_STORE keeps the
// store there to look at, instead of in a temporary directory.
func TestViolatedReportThroughServe(t *testing.T) {
	browser := newBrowser(t)
	root := browserStore(t)
	pausedAndSafe(t, root)
	addr := serveStore(t, root)
	ctx := newTab(t, browser)
	errs := consoleErrors(ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(addr+"/"), chromedp.WaitReady("table.runs")); err != nil {
		t.Fatal(err)
	}

	type index struct {
		Runs, Invalid, ShownAfterFilter int
		Report                          string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[index](`(() => {
		const runs = document.querySelectorAll("tr.run").length, invalid = document.querySelectorAll("tr.run.invalid").length;
		const report = document.querySelector("tr.run.invalid a").href;
		const system = document.querySelector('select[data-filter="system"]');
		system.value = "redis";
		system.dispatchEvent(new Event("change"));
		return {Runs: runs, Invalid: invalid, ShownAfterFilter: document.querySelectorAll("tr.run:not([hidden])").length, Report: report};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 2 || got.Invalid != 1 || got.ShownAfterFilter != 1 {
		t.Errorf("index: %d runs, %d invalid, %d shown for system redis; want 2, 1 and 1", got.Runs, got.Invalid, got.ShownAfterFilter)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(got.Report), chromedp.WaitReady("#timeline")); err != nil {
		t.Fatal(err)
	}
	type report struct {
		Verdicts, Invalid int
		Lanes             []string
		Overlaps          int
		Before, After     string
		Focused           bool
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[report](`(() => {
		const lanes = document.querySelector("svg.lanes");
		const before = lanes.getAttribute("viewBox");
		document.querySelector("table.verdicts a.to-timeline[href^='#overlap-']").click();
		return {
			Verdicts: document.querySelectorAll("table.verdicts tbody tr").length,
			Invalid: document.querySelectorAll("table.verdicts .verdict.invalid").length,
			Lanes: [...document.querySelectorAll("svg.tl text.lane")].map((l) => l.textContent),
			Overlaps: document.querySelectorAll("svg.lanes rect.overlap").length,
			Before: before, After: lanes.getAttribute("viewBox"),
			Focused: document.getElementById("overlap-0").classList.contains("focus"),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if page.Verdicts != len(checkers.All()) || page.Invalid != 4 {
		t.Errorf("%d verdict rows with %d invalid, want one per checker (%d), 4 invalid", page.Verdicts, page.Invalid, len(checkers.All()))
	}
	if want := "nemesis p0 p1 p2 p3 harness"; strings.Join(page.Lanes, " ") != want {
		t.Errorf("lanes %q, want %s", page.Lanes, want)
	}
	if page.Overlaps == 0 || !page.Focused || page.After == page.Before {
		t.Errorf("following the first violation: %d overlaps drawn, focused %v, view %s -> %s; want it zoomed and highlighted",
			page.Overlaps, page.Focused, page.Before, page.After)
	}
	run := strings.TrimPrefix(strings.TrimSuffix(got.Report, "/report.html"), addr+"/")
	screenshot(t, ctx, filepath.Join(root, filepath.FromSlash(run), "report.png"))
	if e := errs(); len(e) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(e, "\n"))
	}
}

// browserStore is the store a browser test makes its runs in: LOCKBREAKER_TEST_STORE,
// kept to look at, or a temporary directory.
func browserStore(t *testing.T) string {
	t.Helper()
	root := os.Getenv("LOCKBREAKER_TEST_STORE")
	if root == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// screenshot saves the whole page the tab shows as a PNG at path.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// consoleErrors gathers the tab's console errors and uncaught exceptions from now on.
func consoleErrors(ctx context.Context) func() []string {
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

// A run whose pause-holder created its hazard, checked from a hand-made run directory (no
// Docker) and opened from disk: the verdicts say what data safety held through, the
// timeline draws one mark per hazard event across the lanes of the clients it involved,
// its tooltip names the hazard, the fault that saw it and what made it so (hostile text
// shown as text), the legend explains the mark, and a hazard's time in the list zooms the
// timeline to it. The screenshot is saved next to the report (report-hazards.png).
func TestHazardsInTheTimeline(t *testing.T) {
	browser := newBrowser(t)
	root := browserStore(t)
	run := "local-local-pause-holder-fenced/20261201T111500Z"
	storeOf(t, root, storedRun{run, "testdata/paused-hazards.jsonl",
		`{"test": "local-local-pause-holder-fenced", "run_id": "20261201T111500Z", "started": "2026-12-01T11:15:00Z", "finished": "2026-12-01T11:15:04Z",
		"spec": {"test": "local-local-pause-holder-fenced", "system": "local", "client": "local", "nemesis": ["pause-holder"], "fencing": true,
		"clients": 2, "ttl": "500ms", "time_limit": "4s", "seed": 7, "key": "k"}}`})
	report := filepath.Join(root, filepath.FromSlash(run), "report.html")
	ctx := newTab(t, browser)
	errs := consoleErrors(ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate((&url.URL{Scheme: "file", Path: report}).String()), chromedp.WaitReady("#timeline")); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Marks, MarkHeight int
		Titles            []string
		Through, Hazards  []string
		Legend            bool
		Before, After     string
		Script            bool
		Images            int
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[page](`(() => {
		const marks = [...document.querySelectorAll("svg.lanes path.hazard")];
		const lanes = document.querySelector("svg.lanes");
		const before = lanes.getAttribute("viewBox");
		document.querySelector("table.occurrences a.to-timeline").click();
		return {
			Marks: marks.length,
			MarkHeight: Math.round(Math.max(...marks.map((m) => m.getBoundingClientRect().height))),
			Titles: marks.map((m) => m.querySelector("title").textContent),
			Through: [...document.querySelectorAll("table.verdicts .through")].map((e) => e.closest("tr").firstChild.textContent + " " + e.textContent),
			Hazards: [...document.querySelectorAll("ul.hazards li")].map((e) => e.textContent),
			Legend: [...document.querySelectorAll(".legend span")].some((s) => s.querySelector("i.hazard") && s.textContent.startsWith("a hazard occurred")),
			Before: before, After: lanes.getAttribute("viewBox"),
			Script: window.__xss === 1, Images: document.querySelectorAll("img").length,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Marks != 2 {
		t.Errorf("%d hazard marks in the timeline, want one per hazard event (2)", got.Marks)
	}
	// The first mark spans the nemesis lane, p0's and p1's: three lanes of 26 units, drawn
	// some 1.2 px a unit at this width.
	if got.MarkHeight < 60 {
		t.Errorf("the tallest hazard mark is %d px high, want it across three lanes", got.MarkHeight)
	}
	wantTitle := `1 grant while its holder was paused (granted-in-pause) at t=22ms, seen by pause-holder: worker-0, worker-1; grant=#6, holder-grant=#1, note="><img src=x onerror=window.__xss=1>`
	if !slices.Contains(got.Titles, wantTitle) {
		t.Errorf("hazard marks' titles %q, want one of %q", got.Titles, wantTitle)
	}
	if want := []string{"data-safety through 1 grant while its holder was paused", "lost-updates through 1 grant while its holder was paused",
		"fencing through 1 grant while its holder was paused"}; !slices.Equal(got.Through, want) {
		t.Errorf("valid safety verdicts say %q, want %q", got.Through, want)
	}
	if len(got.Hazards) != 2 || !strings.HasPrefix(got.Hazards[0], "1 grant while its holder was paused (granted-in-pause) · what pause-holder exists to create") {
		t.Errorf("hazard counts beside the verdicts: %q", got.Hazards)
	}
	if !got.Legend {
		t.Error("the legend does not explain the hazard mark")
	}
	if got.After == got.Before {
		t.Errorf("following a hazard's time left the timeline at %s", got.Before)
	}
	if got.Script || got.Images > 0 {
		t.Errorf("a hazard's detail ran as markup: script ran %v, %d img elements", got.Script, got.Images)
	}
	screenshot(t, ctx, filepath.Join(filepath.Dir(report), "report-hazards.png"))
	if e := errs(); len(e) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(e, "\n"))
	}
}
