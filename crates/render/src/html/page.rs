//! The page around the charts: one HTML document with its style sheet (light and
//! dark schemes through `prefers-color-scheme`) and a small script that records
//! script errors and each chart's rendered size in hidden elements, so a headless
//! browser can check the page. No network: no external scripts, fonts or images.

use super::svg::esc;

/// The style sheet. Colours are CSS variables switched by the reader's colour
/// scheme; every chart mark takes its colour from a class.
const CSS: &str = r#"
:root{color-scheme:light dark;
--bg:#ffffff;--fg:#1f2328;--muted:#59636e;--grid:#e1e4e8;--frame:#8c959f;--panel:#f6f8fa;--border:#d1d9e0;
--inflight:#0969da;--cap:#1f2328;--queue:#bc4c00;--gap:#cf222e;--tps:#1a7f37;--steady:#8250df;--window:#9a6700;
--base:#bc4c00;--cand:#0969da;
--ph-queue:#8c959f;--ph-wait:#d4a72c;--ph-stream:#0969da;--ph-post:#8250df;--fail:#cf222e;
--pass-bg:#dafbe1;--pass-fg:#116329;--fail-bg:#ffebe9;--fail-fg:#a40e26;--inc-bg:#fff8c5;--inc-fg:#7d4e00;--skip-bg:#eaeef2;--skip-fg:#59636e}
@media (prefers-color-scheme:dark){:root{
--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--grid:#262c36;--frame:#656c76;--panel:#151b23;--border:#3d444d;
--inflight:#4493f8;--cap:#e6edf3;--queue:#f0883e;--gap:#f85149;--tps:#3fb950;--steady:#ab7df8;--window:#d29922;
--base:#f0883e;--cand:#4493f8;
--ph-queue:#6e7681;--ph-wait:#d29922;--ph-stream:#4493f8;--ph-post:#ab7df8;--fail:#f85149;
--pass-bg:#12261e;--pass-fg:#3fb950;--fail-bg:#2d1214;--fail-fg:#ff7b72;--inc-bg:#2b2111;--inc-fg:#e3b341;--skip-bg:#212830;--skip-fg:#9198a1}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px 20px 60px}
h1{font-size:1.6em;margin:0 0 4px}
h2{font-size:1.25em;margin:36px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--border)}
h3{font-size:1.05em;margin:20px 0 6px}
p.meta,p.note,.muted{color:var(--muted)}
p.meta{margin:2px 0}
table{border-collapse:collapse;margin:8px 0 16px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid var(--border);text-align:right;vertical-align:top;white-space:nowrap}
th:first-child,td:first-child,td.why{white-space:normal}
.tablewrap{overflow-x:auto}
th:first-child,td:first-child{text-align:left}
td.why{text-align:left;color:var(--muted);font-size:.92em}
th{font-weight:600;background:var(--panel)}
.warnings{border:1px solid var(--window);border-left-width:4px;background:var(--panel);padding:8px 14px;margin:12px 0}
.warnings ul{margin:4px 0;padding-left:20px}
.figure{margin:10px 0 22px}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:8px 24px}
svg.chart{display:block;width:100%;height:auto;overflow:visible}
svg.chart text{fill:var(--fg);font-size:12px;font-family:inherit}
svg.chart text.label{font-size:13px}
svg.chart text.note{fill:var(--muted);font-size:13px}
.grid line{stroke:var(--grid);stroke-width:1}
.axis .frame{fill:none;stroke:var(--frame);stroke-width:1}
path.line{fill:none;stroke-width:1.6;stroke-linejoin:round}
.band{stroke:none;opacity:.25}
.pts circle{stroke:none;opacity:.55}
.inflight{stroke:var(--inflight);fill:var(--inflight)}
path.line.cap{stroke:var(--cap);stroke-dasharray:6 4}
.queue{stroke:var(--queue);fill:var(--queue)}
.tps{stroke:var(--tps);fill:var(--tps)}
.base{stroke:var(--base);fill:var(--base)}
.cand{stroke:var(--cand);fill:var(--cand)}
path.line.dashed{stroke-dasharray:6 4}
path.line.base{stroke-width:3.6;opacity:.5}
path.line.cand{stroke-width:1.5}
path.line.base.dashed{stroke-dasharray:10 5}
path.line.cand.dashed{stroke-dasharray:3 3}
.srun{stroke:var(--steady);fill:var(--steady)}
.swait{stroke:var(--gap);fill:var(--gap)}
.skv{stroke:var(--window);fill:var(--window)}
g.gap path{fill:var(--gap);opacity:.2}
g.gap.base path{fill:var(--base);opacity:.13}
g.gap.cand path{fill:var(--cand);opacity:.13}
g.gap.lvl1 path{opacity:.05}g.gap.lvl2 path{opacity:.1}g.gap.lvl3 path{opacity:.15}g.gap.lvl4 path{opacity:.2}
g.steady rect{fill:var(--steady);opacity:.08}
g.steady line{stroke:var(--steady);stroke-width:1.2;stroke-dasharray:4 3}
g.steady text{fill:var(--steady)}
g.knee rect{fill:none}
g.knee line{stroke:var(--gap);stroke-width:1.4;stroke-dasharray:5 3}
g.knee text{fill:var(--gap)}
.ttft{stroke:var(--inflight);fill:var(--inflight)}
.sweep th,.sweep td:last-child{white-space:normal}
.sweep th,.sweep td{padding:4px 7px}
.sweep td:last-child{text-align:left}
g.window rect{fill:none}
g.window line{stroke:var(--window);stroke-width:1.2;stroke-dasharray:2 3}
g.window text{fill:var(--window)}
path.bar{stroke:none}
.ph-queue{fill:var(--ph-queue)}.ph-wait{fill:var(--ph-wait)}.ph-stream{fill:var(--ph-stream)}.ph-post{fill:var(--ph-post)}
.ph-fail{fill:var(--fail)}.ph-retry{fill:var(--fail);fill-opacity:.45}
.gapkey{fill:var(--gap);opacity:.35}
.gapswatch{opacity:.35}
.steadykey{fill:var(--steady);opacity:.3}
.capkey{fill:var(--cap)}
.band.lg{opacity:.85}.lg-connect{fill:var(--ph-queue)}.lg-wait{fill:var(--ph-wait)}.lg-gen{fill:var(--ph-stream)}.lg-post{fill:var(--ph-post)}
.lg-failed{fill:var(--fail)}.lg-backoff{fill:var(--fail);fill-opacity:.45}.lg-handoff{fill:var(--tps)}.lg-held{fill:var(--gap);fill-opacity:.55}.lg-idle{fill:var(--grid)}
ul.legend{list-style:none;margin:2px 0 0;padding:0 0 0 72px;display:flex;flex-wrap:wrap;gap:4px 18px;font-size:.9em;color:var(--muted)}
ul.legend li{display:flex;align-items:center;gap:6px}
ul.legend svg.swatch rect{stroke:none}
.verdict{display:inline-block;padding:1px 9px;border-radius:10px;font-weight:600;font-size:.92em}
.verdict.pass{background:var(--pass-bg);color:var(--pass-fg)}
.verdict.fail{background:var(--fail-bg);color:var(--fail-fg)}
.verdict.inconclusive{background:var(--inc-bg);color:var(--inc-fg)}
.verdict.skipped{background:var(--skip-bg);color:var(--skip-fg)}
h1 .verdict{font-size:.7em;vertical-align:middle;margin-left:8px}
footer{margin-top:40px;color:var(--muted);font-size:.85em}
"#;

/// Records script errors and chart sizes for automated checks; shows nothing.
const CHECK_SCRIPT_HEAD: &str = r#"(function(){var errs=[];window.__tpscopeErrors=errs;
function put(){var e=document.getElementById('tpscope-errors');if(e){e.textContent=errs.join('\n');}}
window.addEventListener('error',function(ev){errs.push('error: '+(ev.message||'resource failed to load')+' at '+(ev.filename||(ev.target&&(ev.target.src||ev.target.href))||'?')+':'+(ev.lineno||0));put();},true);
window.addEventListener('unhandledrejection',function(ev){errs.push('unhandled rejection: '+ev.reason);put();});
window.__tpscopePut=put;})();"#;

const CHECK_SCRIPT_TAIL: &str = r#"(function(){function measure(){var out=[];var charts=document.querySelectorAll('svg.chart');
for(var i=0;i<charts.length;i++){var c=charts[i];var r=c.getBoundingClientRect();
var marks=c.querySelectorAll('path.line,path.band,path.bar,.pts circle,g.gap path').length;
out.push('chart '+c.id+' '+Math.round(r.width)+'x'+Math.round(r.height)+' marks='+marks+' empty='+(c.getAttribute('data-empty')||'0'));}
out.push('charts '+charts.length);var e=document.getElementById('tpscope-check');if(e){e.textContent=out.join('\n');}
if(window.__tpscopePut){window.__tpscopePut();}}
measure();window.addEventListener('load',measure);})();"#;

/// Wraps a page body in the document: title, style, the check scripts and the
/// hidden check elements.
pub fn document(title: &str, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + CSS.len() + 2048);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    s.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
    s.push_str(&format!("<title>{}</title>\n", esc(title)));
    s.push_str("<script>");
    s.push_str(CHECK_SCRIPT_HEAD);
    s.push_str("</script>\n<style>");
    s.push_str(CSS);
    s.push_str("</style>\n</head>\n<body>\n<main>\n");
    s.push_str(body);
    s.push_str("<footer>Made by tpscope. One self-contained file: no network, no external scripts or fonts.</footer>\n");
    s.push_str("</main>\n<pre id=\"tpscope-errors\" hidden></pre>\n<pre id=\"tpscope-check\" hidden></pre>\n<script>");
    s.push_str(CHECK_SCRIPT_TAIL);
    s.push_str("</script>\n</body>\n</html>\n");
    s
}

/// A `<table>` with a head row and body rows; cells are escaped, except that a
/// cell may be given as pre-rendered HTML by [`Cell::Html`].
pub fn table(heads: &[String], rows: &[Vec<Cell>]) -> String {
    let mut s = String::from("<div class=\"tablewrap\"><table>\n<thead><tr>");
    for h in heads {
        s.push_str(&format!("<th>{}</th>", esc(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            match c {
                Cell::Text(t) => s.push_str(&format!("<td>{}</td>", esc(t))),
                Cell::Why(t) => s.push_str(&format!("<td class=\"why\">{}</td>", esc(t))),
                Cell::Html(h) => s.push_str(&format!("<td>{h}</td>")),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table></div>\n");
    s
}

/// One table cell.
pub enum Cell {
    /// Plain text (escaped).
    Text(String),
    /// An explanation, set in a muted, left-aligned style (escaped).
    Why(String),
    /// Ready HTML.
    Html(String),
}

/// A box listing warnings; empty when there are none.
pub fn warnings(items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut s = String::from("<div class=\"warnings\" role=\"note\"><strong>Warnings</strong><ul>");
    for w in items {
        s.push_str(&format!("<li>{}</li>", esc(w)));
    }
    s.push_str("</ul></div>\n");
    s
}
