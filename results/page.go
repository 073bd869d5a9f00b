package results

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"time"
)

// What the report and the index share: their style, and the policy that lets a page run
// its own script and nothing else. Each page's script is a constant of this package,
// written out as it is (template.JS), and the page's Content-Security-Policy names it by
// its hash, so no string from a run can ever run as script (not inline, not as an event
// handler) and the page loads nothing from the network.

// contentSecurityPolicy allows the inline styles and the one script whose text is given.
func contentSecurityPolicy(script string) template.HTMLAttr {
	sum := sha256.Sum256([]byte(script))
	return template.HTMLAttr(fmt.Sprintf(`content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-%s'"`,
		base64.StdEncoding.EncodeToString(sum[:])))
}

// pageHead is the start of every page: the policy for its script (template data .Policy)
// and the shared style; the page's own style follows.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" {{.Policy}}>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
:root { --valid: #1a7f37; --invalid: #cf222e; --unknown: #9a6700; --na: #6e7781; --line: #d0d7de; --muted: #57606a;
  --ok: #1a7f37; --fail: #8c959f; --info: #bc4c00; --hold: #54aeff; --fault: #fbefff; --fault-edge: #bf3989; --hazard: #1f2328; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
.meta { color: var(--muted); margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; vertical-align: top; padding: .35rem .6rem; border-bottom: 1px solid var(--line); }
th { background: #f6f8fa; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: .05rem .55rem; border-radius: 1rem; color: #fff; font-weight: 600; font-size: .85rem; white-space: nowrap; }
.verdict.valid { background: var(--valid); }
.verdict.invalid { background: var(--invalid); }
.verdict.unknown { background: var(--unknown); }
.verdict.not-applicable { background: var(--na); }
pre, code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: .4rem; padding: .75rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
.muted { color: var(--muted); }
`

// seconds is a time as the report and the checkers' evidence print it: "t=1.144ms".
func seconds(d time.Duration) string { return "t=" + d.Round(time.Microsecond).String() }
