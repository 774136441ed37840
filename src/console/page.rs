//! The console page: its static files compiled into the binary (no build step, no file
//! system access, so no path to traverse).

use crate::errors::ApiError;
use crate::reply::Reply;

const INDEX: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");
const SHELL_JS: &str = include_str!("page/shell.js");
const FORMAT_JS: &str = include_str!("page/format.js");
const CHARTS_JS: &str = include_str!("page/charts.js");
/// uPlot 1.6.32 (MIT), vendored: `page/vendor/README.md`.
const UPLOT_JS: &str = include_str!("page/vendor/uplot.min.js");
const UPLOT_CSS: &str = include_str!("page/vendor/uplot.min.css");
const TEAM_JS: &str = include_str!("page/team.js");
const BREAKDOWN_JS: &str = include_str!("page/breakdown.js");
const PUSHES_JS: &str = include_str!("page/pushes.js");
const PLANS_JS: &str = include_str!("page/plans.js");

/// Scripts only from this origin, no framing, no inline script.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'";

pub fn serve(file: &str) -> Result<Reply, ApiError> {
    let (content_type, body) = match file {
        "" | "index.html" => ("text/html; charset=utf-8", INDEX),
        "app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "shell.js" => ("text/javascript; charset=utf-8", SHELL_JS),
        "format.js" => ("text/javascript; charset=utf-8", FORMAT_JS),
        "charts.js" => ("text/javascript; charset=utf-8", CHARTS_JS),
        "uplot.js" => ("text/javascript; charset=utf-8", UPLOT_JS),
        "uplot.css" => ("text/css; charset=utf-8", UPLOT_CSS),
        "team.js" => ("text/javascript; charset=utf-8", TEAM_JS),
        "breakdown.js" => ("text/javascript; charset=utf-8", BREAKDOWN_JS),
        "pushes.js" => ("text/javascript; charset=utf-8", PUSHES_JS),
        "plans.js" => ("text/javascript; charset=utf-8", PLANS_JS),
        _ => return Err(ApiError::new(404, "not_found", "no such console file")),
    };
    let mut r = Reply::json(200, body.as_bytes().to_vec());
    r.content_type = Some(content_type);
    Ok(r.with_headers(vec![
        ("Content-Security-Policy", CSP.into()),
        ("X-Content-Type-Options", "nosniff".into()),
        ("X-Frame-Options", "DENY".into()),
        ("Referrer-Policy", "same-origin".into()),
        ("Cache-Control", "no-cache".into()),
    ]))
}
