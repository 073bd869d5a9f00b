package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// xss runs script if any page puts it into the DOM as markup rather than text.
const xss = `"><img src=x onerror=window.__xss=1>`

// A history full of hostile strings is checked, then every page the check wrote (the
// report and porcupine's visualisations) is opened in headless Chromium, and every
// operation of porcupine's diagram is hovered so its tooltip is drawn: no script may run,
// and the hostile text must be shown as text.
func TestHostileHistoryRunsNoScriptInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (make test installs it): ", err)
	}
	dir := t.TempDir()
	writeHostileHistory(t, filepath.Join(dir, "history.jsonl"))
	if code, _, stderr := lockbreaker(t, nil, "check", dir); code != exitInvalid {
		t.Fatalf("check: exit %d, want %d (a violated history): %s", code, exitInvalid, stderr)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	if len(pages) < 3 {
		t.Fatalf("pages %q: want the report and a visualisation per porcupine checker", pages)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox)
	alloc, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(browser); err != nil { // starts the browser; each page gets a tab
		t.Fatal(err)
	}
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			tab, cancel := chromedp.NewContext(browser)
			defer cancel()
			ctx, cancel := context.WithTimeout(tab, time.Minute)
			defer cancel()
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
				t.Errorf("no tooltip showed the hostile error as text; tooltips:\n%s", strings.Join(shown, "\n"))
			}
		})
	}
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
	fault := event{"type": "info", "process": -1, "fault": "pause" + xss, "nodes": []string{"worker0" + xss}}
	events := []event{
		{"type": "invoke", "process": 0, "f": "acquire", "key": key},
		{"type": "ok", "process": 0, "f": "acquire", "key": key, "error": xss},
		{"type": "invoke", "process": 0, "f": "read", "key": key},
		{"type": "ok", "process": 0, "f": "read", "key": key, "value": 0},
		merge(fault, event{"f": "start"}),
		{"type": "invoke", "process": 1, "f": "acquire", "key": key},
		{"type": "ok", "process": 1, "f": "acquire", "key": key, "error": xss},
		{"type": "invoke", "process": 1, "f": "write", "key": key, "value": 1},
		{"type": "ok", "process": 1, "f": "write", "key": key},
		merge(fault, event{"f": "stop"}),
		{"type": "invoke", "process": 0, "f": "write", "key": key, "value": 1},
		{"type": "ok", "process": 0, "f": "write", "key": key, "error": xss},
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
