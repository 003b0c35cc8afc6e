//! `orch serve` (issue 23): the board's API says what the commands say, its metrics parse,
//! it pushes a change of the store live, a listen address beyond loopback needs the token,
//! wrong tokens are rate-limited per client, and in a real browser (headless chromium over
//! WebDriver) the page shows a worker's card in its group, follows it live, acts, and renders
//! every view for an organisation with a worker in every state.

use crate::support::{ForgeSpec, Org, RepoSpec, Spec, job, output_text, poll_until};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `orch serve`, killed when dropped.
pub struct Served {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl Served {
    /// Stops the board and returns what it wrote on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `orch serve --listen <listen>` and reads the address it prints first.
pub fn serve(org: &Org, listen: &str) -> Served {
    let mut child = org
        .cmd(&["serve", "--listen", listen])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("orch serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(at) = line.trim().strip_prefix("orch serve: listening on http://") else {
        let _ = child.kill();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("orch serve printed {line:?}; stderr: {err}");
    };
    let port = at.rsplit(':').next().unwrap().to_string();
    Served {
        child,
        addr: format!("127.0.0.1:{port}"),
    }
}

/// Checks `value` against docs/schema/<name>.json, naming every violation.
fn assert_valid(name: &str, value: &Value) {
    let path = format!("{}/docs/schema/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let v = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = v
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}\n{value}");
}

/// One HTTP request over loopback: (status, body).
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let mut req = client.request(method.parse().unwrap(), url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    })
}

pub fn get_json(s: &Served, path: &str) -> Value {
    let (status, body) = http("GET", &format!("http://{}{path}", s.addr), &[], None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// The group of the board `worker` is in, and its card.
fn card_of(board: &Value, worker: &str) -> Option<(String, Value)> {
    board["groups"].as_array()?.iter().find_map(|g| {
        g["cards"]
            .as_array()?
            .iter()
            .find(|c| c["worker_id"] == worker)
            .map(|c| (g["need"].as_str().unwrap().to_string(), c.clone()))
    })
}

fn org_with_a_worker() -> (Org, String) {
    let org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"])),
    );
    let id = org.spawn_detached("core", "idle on the board");
    (org, id)
}

/// Records `repo`'s base branch red, as the cascade records what it saw of the forge.
fn red_base(org: &Org, repo: &str) {
    let row = orch::store::upstream::UpstreamRow {
        repo: repo.to_string(),
        branch: "main".into(),
        sha: Some("0123456789abcdef0123456789abcdef01234567".into()),
        verdict: Some("red".into()),
        failed_jobs: vec!["unit".into()],
        detail: None,
        checked_ms: orch::store::now_ms(),
    };
    orch::store::Store::open(&org.state)
        .unwrap()
        .write(|tx| orch::store::upstream::put(tx, &row))
        .unwrap();
}

/// The fields of a worker that do not move while it idles.
fn steady(w: &Value) -> Value {
    json!([
        w["worker_id"],
        w["repo"],
        w["task"],
        w["milestone"],
        w["since"],
        w["branch"],
        w["tracked_sha"],
        w["verdict"],
        w["ci_jobs"],
        w["usage"],
        w["fix_attempts_max"]
    ])
}

/// Series (name with labels) and their values.
type Samples = Vec<(String, f64)>;

/// A Prometheus text exposition parsed: every sample's family declared by HELP and TYPE
/// before it, names by the naming guide. Returns (name with labels → value, name → type).
fn parse_metrics(text: &str) -> (Samples, Vec<(String, String)>) {
    let mut samples = Vec::new();
    let mut types: Vec<(String, String)> = Vec::new();
    let mut helped = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert_eq!(
                helped.last().map(String::as_str),
                Some(name),
                "HELP before TYPE: {line}"
            );
            types.push((name.to_string(), kind.to_string()));
        } else if !line.is_empty() {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert!(
                name.starts_with("orch_")
                    && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{name}"
            );
            // A histogram's samples are its family's name with _bucket, _sum or _count.
            let family = match types.last() {
                Some((f, kind)) if kind == "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|base| base == f)
                    .unwrap_or(name),
                _ => name,
            };
            assert_eq!(
                types.last().map(|t| t.0.as_str()),
                Some(family),
                "no TYPE for {line}"
            );
            for bad in ["worker_id", "sha="] {
                assert!(!series.contains(bad), "a high-cardinality label: {line}");
            }
            if let Some(labels) = series.strip_prefix(name) {
                assert!(
                    labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                    "{line}"
                );
            }
            samples.push((series.to_string(), value.parse::<f64>().unwrap()));
        }
    }
    for (name, kind) in &types {
        assert_eq!(name.ends_with("_total"), kind == "counter", "{name} {kind}");
    }
    (samples, types)
}

fn sample(samples: &[(String, f64)], series: &str) -> f64 {
    samples
        .iter()
        .find(|(s, _)| s == series)
        .unwrap_or_else(|| panic!("no {series} in {samples:?}"))
        .1
}

#[test]
fn the_api_and_the_metrics_say_what_status_says() {
    let (org, id) = org_with_a_worker();
    let s = serve(&org, "127.0.0.1:0");
    let status = org.json(&["status", "--json"]);
    let api = get_json(&s, "/api/workers");
    let ws = |v: &Value| {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(steady)
            .collect::<Vec<_>>()
    };
    assert_eq!(ws(&api), ws(&status));
    let locks = |v: &Value| {
        json!(
            v["locks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| json!([l["repo"], l["holder"], l["kind"]]))
                .collect::<Vec<_>>()
        )
    };
    assert_eq!(locks(&api), locks(&status));
    assert_eq!(api["locks"][0]["holder"], id.as_str());

    // Filters as the command's: another repository shows nobody.
    let vm = get_json(&s, "/api/workers?repo=vm");
    assert_eq!(vm["workers"].as_array().unwrap().len(), 0);
    let (code, body) = http(
        "GET",
        &format!("http://{}/api/workers?repo=nope", s.addr),
        &[],
        None,
    );
    assert_eq!(code, 400, "{body}");

    let shown = org.json(&["sessions", "show", &id, "--json"]);
    let one = get_json(&s, &format!("/api/workers/{id}"));
    assert_eq!(steady(&one), steady(&shown));
    assert_eq!(one["events"], shown["events"]);
    assert_eq!(one["checkpoint"], shown["checkpoint"]);
    let (code, _) = http(
        "GET",
        &format!("http://{}/api/workers/no-such", s.addr),
        &[],
        None,
    );
    assert_eq!(code, 404);

    let board = get_json(&s, "/api/board");
    let (group, card) = card_of(&board, &id).expect("the worker has a card");
    assert_eq!(group, "working");
    assert_eq!(card["lock_held"], true);
    assert_eq!(card["repo"], "core");

    let graph = get_json(&s, "/api/graph");
    assert_eq!(graph["graph"], org.json(&["graph", "--format", "json"]));
    assert_eq!(graph["locks"][0]["holder"], id.as_str());
    assert_eq!(graph["base_ci"], json!([]), "no base branch looked at yet");
    red_base(&org, "core");
    let graph = get_json(&s, "/api/graph");
    assert_eq!(graph["base_ci"][0]["repo"], "core");
    assert_eq!(graph["base_ci"][0]["verdict"], "red");
    assert_eq!(graph["base_ci"][0]["failed_jobs"], json!(["unit"]));
    assert_eq!(get_json(&s, "/api/alerts"), org.json(&["alerts", "--json"]));
    assert_eq!(get_json(&s, "/api/waves"), json!([]));
    // The nodes: `orch nodes --json`'s view (this host, beaten by the spawn), valid against
    // its schema; the heartbeat's age is read on the database's clock at each answer.
    let nodes = get_json(&s, "/api/nodes");
    assert_valid("nodes", &nodes);
    let of_nodes = |v: &Value| {
        let mut v = v.clone();
        for n in v["nodes"].as_array_mut().unwrap() {
            n.as_object_mut().unwrap().remove("heartbeat_age_s");
        }
        v
    };
    assert_eq!(of_nodes(&nodes), of_nodes(&org.json(&["nodes", "--json"])));
    assert_eq!(nodes["nodes"].as_array().unwrap().len(), 1, "{nodes}");
    assert_eq!(nodes["nodes"][0]["name"], nodes["this_node"], "{nodes}");

    let (code, text) = http("GET", &format!("http://{}/metrics", s.addr), &[], None);
    assert_eq!(code, 200);
    let (samples, types) = parse_metrics(&text);
    assert_eq!(sample(&samples, "orch_workers{milestone=\"WORKING\"}"), 1.0);
    assert_eq!(sample(&samples, "orch_workers{milestone=\"DONE\"}"), 0.0);
    assert_eq!(sample(&samples, "orch_locks_held{kind=\"worker\"}"), 1.0);
    assert_eq!(
        sample(&samples, "orch_attention_workers{need=\"working\"}"),
        1.0
    );
    assert_eq!(sample(&samples, "orch_respawns_total"), 0.0);
    assert_eq!(sample(&samples, "orch_ci_wait_seconds_count"), 0.0);
    let this = nodes["this_node"].as_str().unwrap();
    assert_eq!(
        sample(&samples, &format!("orch_node_workers{{node=\"{this}\"}}")),
        1.0
    );
    let age = sample(
        &samples,
        &format!("orch_node_heartbeat_age_seconds{{node=\"{this}\"}}"),
    );
    assert!((0.0..60.0).contains(&age), "{age}");
    assert_eq!(
        sample(
            &samples,
            "orch_forge_request_errors_total{kind=\"transient\"}"
        ),
        0.0
    );
    // Every family and its type is the list docs/metrics.md gives, in its order.
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let documented: Vec<(String, String)> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|rest| {
            let mut cells = rest.split('|');
            let name = cells
                .next()
                .unwrap()
                .trim()
                .trim_end_matches('`')
                .to_string();
            (name, cells.next().unwrap().trim().to_string())
        })
        .collect();
    assert_eq!(types, documented, "/metrics against docs/metrics.md");
    for family in [
        "orch_build_info",
        "orch_ci_verdicts_total",
        "orch_violations_total",
        "orch_alert_deliveries_total",
        "orch_outbox_pending",
        "orch_spend_usd_total",
        "orch_lock_waits",
    ] {
        assert!(
            types.iter().any(|(n, _)| n == family),
            "{family} missing:\n{text}"
        );
    }
    let (code, page) = http("GET", &format!("http://{}/", s.addr), &[], None);
    assert_eq!(code, 200);
    assert!(
        page.contains("EventSource") && !page.contains("http://") && !page.contains("https://")
    );
    // No budget configured: the page carries none (its worker view says "no budget").
    assert!(
        page.contains(
            r#"<meta name="orch-budget" content="{&quot;max_cost_usd&quot;:null,&quot;max_tokens&quot;:null}">"#
        ),
        "{page}"
    );
    assert_eq!(
        http("GET", &format!("http://{}/health/ready", s.addr), &[], None).0,
        200
    );
}

/// The worker's live log: the lines `orch logs` prints (orch's own events marked), orch's
/// secrets redacted whatever the worker printed; a cursor follows it, the page asks again for
/// what came after, and it says when nothing more will come.
#[test]
fn the_worker_log_reads_as_orch_logs_and_follows_with_its_cursor() {
    let token = "board-token-printed-by-a-worker-77";
    let mut org = Org::new(Spec::local("idle.sh").repo(RepoSpec::new("core")));
    with_token(&mut org, token);
    let id = org.spawn_detached("core", &format!("leak {token}"));
    let s = serve(&org, "127.0.0.1:0");
    let log = |after: Option<&str>| {
        let q = after.map_or(String::new(), |c| format!("?after={c}"));
        get_json(&s, &format!("/api/workers/{id}/log{q}"))
    };
    let text = |v: &Value| -> Vec<String> {
        v["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["text"].as_str().unwrap().to_string())
            .collect()
    };
    let last = std::cell::RefCell::new(Value::Null);
    poll_until(
        "the worker's line in its log",
        Duration::from_secs(20),
        || {
            *last.borrow_mut() = log(None);
            text(&last.borrow())
                .iter()
                .any(|l| l.starts_with("WORKING: idle for leak"))
                .then_some(())
        },
        || format!("{}", last.borrow()),
    );
    let first = last.into_inner();
    assert_eq!(first["worker_id"], id.as_str());
    assert_eq!(first["ended"], false);
    assert_eq!(first["more"], false);
    let body = first.to_string();
    assert!(!body.contains(token), "a secret in the log: {body}");
    assert!(
        text(&first).contains(&"WORKING: idle for leak [redacted]".to_string()),
        "{body}"
    );
    // The lines `orch logs` prints, the token redacted; orch's events marked as its own.
    let out = org.run(&["logs", &id]);
    assert!(out.status.success(), "{}", output_text(&out));
    let printed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .replace(token, "[redacted]")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(text(&first), printed);
    for l in first["lines"].as_array().unwrap() {
        let text = l["text"].as_str().unwrap();
        assert_eq!(l["orch"], text.starts_with("[orch "), "{l}");
    }
    // Nothing new: nothing again.
    let cursor = first["cursor"].as_str().unwrap().to_string();
    assert_eq!(log(Some(&cursor))["lines"], json!([]));
    // The worker cancelled: what came after, and then that nothing more will come.
    let out = org.run(&["cancel", &id, "--reason", "log test"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let cursor = std::cell::RefCell::new(cursor);
    let after: std::cell::RefCell<Vec<String>> = Default::default();
    poll_until(
        "the cancel in the log and its end",
        Duration::from_secs(30),
        || {
            let v = log(Some(&cursor.borrow()));
            *cursor.borrow_mut() = v["cursor"].as_str().unwrap().to_string();
            after.borrow_mut().extend(text(&v));
            (v["ended"] == true).then_some(())
        },
        || format!("{:?}", after.borrow()),
    );
    let after = after.into_inner();
    assert!(
        after
            .iter()
            .any(|l| l.starts_with("[orch ") && l.contains("log test")),
        "{after:?}"
    );
    assert!(
        !after.iter().any(|l| l.contains("WORKING: idle")),
        "{after:?}"
    );
    // A cursor the board did not give, a worker it does not know.
    let (code, body) = http(
        "GET",
        &format!("http://{}/api/workers/{id}/log?after=12;drop", s.addr),
        &[],
        None,
    );
    assert_eq!(code, 400, "{body}");
    let (code, _) = http(
        "GET",
        &format!("http://{}/api/workers/no-such/log", s.addr),
        &[],
        None,
    );
    assert_eq!(code, 404);
}

/// The events of `/api/events` as they come: (event name, data), read over a raw socket.
pub struct Events(BufReader<TcpStream>);

impl Events {
    pub fn open(s: &Served) -> Events {
        Events::open_with(s, "")
    }

    /// The stream opened with `extra` header lines (each ending in `\r\n`).
    pub fn open_with(s: &Served, extra: &str) -> Events {
        let mut t = TcpStream::connect(&s.addr).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(
            t,
            "GET /api/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n{extra}\r\n",
            s.addr
        )
        .unwrap();
        Events(BufReader::new(t))
    }

    /// The next `board` event's data (skipping keep-alive comments and chunk framing).
    pub fn next_board(&mut self) -> Value {
        let mut is_board = false;
        loop {
            let mut line = String::new();
            let n = self
                .0
                .read_line(&mut line)
                .expect("an event before the read timeout");
            assert!(n > 0, "the event stream ended");
            let line = line.trim_end();
            if line == "event: board" {
                is_board = true;
            } else if let Some(d) = line.strip_prefix("data: ")
                && is_board
            {
                return serde_json::from_str(d).unwrap();
            }
        }
    }
}

#[test]
fn a_change_of_the_store_is_pushed_to_the_open_streams() {
    let (org, id) = org_with_a_worker();
    let s = serve(&org, "127.0.0.1:0");
    let mut ev = Events::open(&s);
    let first = ev.next_board();
    assert_eq!(card_of(&first["board"], &id).unwrap().0, "working");
    assert_eq!(first["status"]["workers"][0]["worker_id"], id.as_str());
    let out = org.run(&["cancel", &id, "--reason", "board test"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let cancelled_at = Instant::now();
    loop {
        let b = ev.next_board();
        if let Some((group, card)) = card_of(&b["board"], &id)
            && card["milestone"] == "CANCELLED"
        {
            assert_eq!(group, "done");
            assert_eq!(card["lock_held"], false);
            break;
        }
    }
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "the update came {:?} after the cancel",
        cancelled_at.elapsed()
    );
}

#[test]
fn beyond_loopback_the_board_needs_its_token() {
    let (org, _id) = org_with_a_worker();
    // No serve.token_env: refused before listening.
    let out = org.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("serve.token_env"),
        "{}",
        output_text(&out)
    );

    let mut text = std::fs::read_to_string(&org.config_path).unwrap();
    text.push_str("\nserve:\n  token_env: ORCH_BOARD_TOKEN\n");
    std::fs::write(&org.config_path, text).unwrap();
    // Named but not set: refused, naming the variable.
    let out = org.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("ORCH_BOARD_TOKEN is not set"),
        "{}",
        output_text(&out)
    );

    let token = "board-token-0123456789abcdef";
    let mut org = org;
    org.set_env("ORCH_BOARD_TOKEN", token);
    let s = serve(&org, "0.0.0.0:0");
    let url = format!("http://{}/api/workers", s.addr);
    let (code, body) = http("GET", &url, &[], None);
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains(token));
    assert_eq!(
        http(
            "GET",
            &url,
            &[("authorization", "Bearer wrong-token")],
            None
        )
        .0,
        401
    );
    let bearer = format!("Bearer {token}");
    let (code, body) = http("GET", &url, &[("authorization", &bearer)], None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["workers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        http("GET", &format!("http://{}/metrics", s.addr), &[], None).0,
        401
    );
    assert_eq!(
        http("GET", &format!("http://{}/health/live", s.addr), &[], None).0,
        200
    );
    // The page's login: a session of its own in the cookie, never the token.
    let raw = |request: String| -> String {
        let mut t = TcpStream::connect(&s.addr).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        t.write_all(request.as_bytes()).unwrap();
        let mut head = String::new();
        let mut r = BufReader::new(t);
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        head
    };
    let form = format!("token={token}");
    let head = raw(format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    ));
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: orch_board="))
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("a session cookie in:\n{head}"))
        .to_string();
    assert!(
        !session.contains(token),
        "the cookie holds no token: {head}"
    );
    // Beyond loopback the cookie is for HTTPS only, out of scripts' reach, never sent by
    // another site, and it expires.
    let cookie = head
        .lines()
        .find(|l| l.starts_with("set-cookie: "))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Secure", "Max-Age=43200"] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    let events = |cookie: &str| {
        raw(format!(
            "GET /api/events HTTP/1.1\r\nHost: x\r\nCookie: orch_board={cookie}\r\n\r\n"
        ))
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
    };
    // The session opens the event stream (an EventSource sends no header); the token itself
    // in the cookie does not, nor does the session once signed out.
    assert!(events(&session).starts_with("HTTP/1.1 200"), "session");
    assert!(
        events(token).starts_with("HTTP/1.1 401"),
        "token as a cookie"
    );
    // A stream open with the session when it signs out ends (it does not outlive the sign-in).
    let mut open = TcpStream::connect(&s.addr).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        open,
        "GET /api/events HTTP/1.1\r\nHost: x\r\nCookie: orch_board={session}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut open = BufReader::new(open);
    let mut line = String::new();
    while line.trim_end() != "event: board" {
        line.clear();
        assert!(
            open.read_line(&mut line).unwrap() > 0,
            "the stream ended early"
        );
    }
    let head = raw(format!(
        "POST /logout HTTP/1.1\r\nHost: x\r\nCookie: orch_board={session}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    ));
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    assert!(head.contains("Max-Age=0"), "the cookie cleared: {head}");
    assert!(events(&session).starts_with("HTTP/1.1 401"), "signed out");
    let mut rest = String::new();
    open.read_to_string(&mut rest)
        .expect("the stream ends at the sign-out, before the read timeout");
    assert!(
        rest.ends_with("0\r\n\r\n"),
        "a chunked stream's end: {rest:?}"
    );
}

/// A sign-in from `source` (a loopback address of its own: another client) as the login form
/// sends it, or with `bearer` as the API takes it: (status, Retry-After).
fn sign_in_from(
    s: &Served,
    source: &str,
    form_token: Option<&str>,
    bearer: Option<&str>,
) -> (u16, Option<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .no_proxy()
            .local_address(source.parse::<std::net::IpAddr>().unwrap())
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let req = match (form_token, bearer) {
            (Some(t), _) => client
                .post(format!("http://{}/login", s.addr))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("token={t}")),
            (None, Some(t)) => client
                .get(format!("http://{}/api/workers", s.addr))
                .header("authorization", format!("Bearer {t}")),
            (None, None) => client.get(format!("http://{}/api/workers", s.addr)),
        };
        let resp = req.send().await.expect("the board answers");
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        (resp.status().as_u16(), retry)
    })
}

/// Wrong tokens are counted per client address: the sixth sign-in within the window is
/// refused (429, Retry-After), a right token too, while another client signs in; once the
/// window has passed the client signs in again. The attempted tokens are never logged.
/// (`ORCH_TEST_LOGIN_WINDOW` shortens the minute.)
#[test]
fn wrong_tokens_are_rate_limited_per_client_and_the_limit_passes() {
    let (mut org, _id) = org_with_a_worker();
    let token = "board-token-right-one-31337";
    with_token(&mut org, token);
    // Seconds, not a minute; enough for the attempts below on a busy machine.
    org.set_env("ORCH_TEST_LOGIN_WINDOW", "5s");
    let s = serve(&org, "0.0.0.0:0");
    let (me, other) = ("127.0.0.1", "127.0.0.2");
    let started = Instant::now();
    let wrong: Vec<String> = (0..5).map(|i| format!("guessed-token-{i}-xyzzy")).collect();
    for (i, w) in wrong.iter().enumerate() {
        // The form and the API's bearer token count alike.
        let (code, retry) = if i % 2 == 0 {
            sign_in_from(&s, me, Some(w), None)
        } else {
            sign_in_from(&s, me, None, Some(w))
        };
        assert_eq!((code, retry), (401, None), "wrong token {i}");
    }
    let (code, retry) = sign_in_from(&s, me, Some("guessed-token-6-xyzzy"), None);
    assert_eq!(code, 429);
    let wait: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=5).contains(&wait), "Retry-After: {wait}");
    // While refused, a right token is refused alike (a guess that succeeds is not told apart),
    // by the form and by the API; a request with no token is not a sign-in.
    assert_eq!(sign_in_from(&s, me, Some(token), None).0, 429);
    assert_eq!(sign_in_from(&s, me, None, Some(token)).0, 429);
    assert_eq!(sign_in_from(&s, me, None, None), (401, None));
    // Another client signs in meanwhile.
    assert_eq!(sign_in_from(&s, other, Some(token), None).0, 303);
    assert_eq!(sign_in_from(&s, other, None, Some(token)).0, 200);
    // The window passed (the refused attempts did not extend it): signed in again.
    let code = std::cell::Cell::new(0);
    poll_until(
        "the sign-in to be let through again",
        Duration::from_secs(15),
        || {
            code.set(sign_in_from(&s, me, Some(token), None).0);
            (code.get() == 303).then_some(())
        },
        || format!("last answer {}", code.get()),
    );
    assert!(
        started.elapsed() >= Duration::from_millis(4500),
        "let through after {:?}, within the 5 s window",
        started.elapsed()
    );
    assert_eq!(sign_in_from(&s, me, None, Some(token)).0, 200);
    let log = s.stop();
    assert!(
        log.contains("too many wrong tokens") && log.contains("127.0.0.1"),
        "the limit is logged: {log}"
    );
    for t in wrong.iter().map(String::as_str).chain([token]) {
        assert!(!log.contains(t), "a token in the log: {log}");
    }
}

// ---- the page in a real browser --------------------------------------------------------------

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless chromium driven over the W3C WebDriver protocol; driver and browser end when
/// dropped.
struct Browser {
    driver: Child,
    base: String,
    session: String,
}

impl Browser {
    /// `None` (with a visible message) only when chromium is absent and ORCH_BOARD_TESTS=skip.
    fn start() -> Option<Browser> {
        let present =
            std::path::Path::new(CHROMIUM).exists() && std::path::Path::new(CHROMEDRIVER).exists();
        if !present {
            if std::env::var("ORCH_BOARD_TESTS").as_deref() == Ok("skip") {
                eprintln!(
                    "SKIPPED: the board's browser test (no {CHROMIUM} or {CHROMEDRIVER}; ORCH_BOARD_TESTS=skip)"
                );
                return None;
            }
            panic!(
                "the board's browser test needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver), or ORCH_BOARD_TESTS=skip"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = std::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let mut b = Browser {
            driver,
            base,
            session: String::new(),
        };
        poll_until(
            "chromedriver to answer",
            Duration::from_secs(30),
            || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    reqwest::Client::builder()
                        .no_proxy()
                        .build()
                        .unwrap()
                        .get(format!("{}/status", b.base))
                        .send()
                        .await
                        .ok()
                        .filter(|r| r.status().is_success())
                })
                .map(|_| ())
            },
            String::new,
        );
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": ["--headless=new", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--no-proxy-server", "--disable-background-networking"]},
            "goog:loggingPrefs": {"browser": "ALL"}}}});
        let v = b.call("POST", "/session", Some(&caps));
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Some(b)
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, text) = http(method, &format!("{}{path}", self.base), &[], body);
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        assert_eq!(status, 200, "WebDriver {method} {path}: {text}");
        v["value"].clone()
    }

    fn go(&self, url: &str) {
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            Some(&json!({"url": url})),
        );
    }

    fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.session),
            Some(&json!({"script": script, "args": []})),
        )
    }

    fn size(&self, width: u32, height: u32) {
        self.call(
            "POST",
            &format!("/session/{}/window/rect", self.session),
            Some(&json!({"width": width, "height": height})),
        );
    }

    /// The errors the browser's console showed since the last call (script errors, failed
    /// loads, CSP refusals), from chromedriver's log.
    fn console_errors(&self) -> Vec<String> {
        let log = self.call(
            "POST",
            &format!("/session/{}/se/log", self.session),
            Some(&json!({"type": "browser"})),
        );
        log.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every address the page has loaded from is its own origin (no request leaves the
    /// board, on loopback here).
    fn assert_loopback_only(&self) {
        let away = self.js(
            "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href]).filter(n => !n.startsWith(location.origin) || !location.origin.startsWith('http://127.0.0.1:'))",
        );
        assert_eq!(away, json!([]), "requests beyond the board on loopback");
    }

    /// Saves a screenshot as `target/board-screenshots/<name>.png`.
    fn screenshot(&self, name: &str) {
        use base64_like::decode;
        let v = self.call(
            "GET",
            &format!("/session/{}/screenshot", self.session),
            None,
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/board-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), decode(v.as_str().unwrap())).unwrap();
    }

    /// Signs the page in at `/login` with the board's token, as a person types it, and waits
    /// for the board (whose cookie no script can read).
    fn sign_in(&self, s: &Served, token: &str) {
        self.go(&format!("http://{}/login", s.addr));
        self.js(&format!(
            "document.querySelector('input[name=token]').value = {}; document.querySelector('form').submit(); return null",
            json!(token)
        ));
        self.wait_for(
            "the board after signing in",
            "return location.pathname + ' ' + document.cookie.length",
            &json!("/ 0"),
            Duration::from_secs(20),
        );
    }

    /// Polls `script` until it returns `want`, for at most `limit`; how long it took.
    fn wait_for(&self, what: &str, script: &str, want: &Value, limit: Duration) -> Duration {
        let t0 = Instant::now();
        let last = std::cell::RefCell::new(Value::Null);
        poll_until(
            what,
            limit,
            || {
                *last.borrow_mut() = self.js(script);
                (&*last.borrow() == want).then_some(())
            },
            || format!("last: {}", last.borrow()),
        );
        t0.elapsed()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                "DELETE",
                &format!("{}/session/{}", self.base, self.session),
                &[],
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Base64 (standard alphabet) decoding for the screenshots: no crate for twenty lines.
mod base64_like {
    pub fn decode(s: &str) -> Vec<u8> {
        let val = |c: u8| -> Option<u32> {
            Some(match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            } as u32)
        };
        let digits: Vec<u32> = s.bytes().filter_map(val).collect();
        let mut out = Vec::with_capacity(digits.len() * 3 / 4);
        for chunk in digits.chunks(4) {
            let mut n = 0u32;
            for (i, d) in chunk.iter().enumerate() {
                n |= d << (18 - 6 * i);
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
        }
        out
    }
}

#[test]
fn the_page_shows_the_card_in_its_group_and_follows_changes_live() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let (org, id) = org_with_a_worker();
    // A budget of $5 and 200,000 tokens, and spend recorded against it (as a supervisor
    // records its agent's): the worker view shows the one beside the other.
    let text = std::fs::read_to_string(&org.config_path).unwrap();
    std::fs::write(
        &org.config_path,
        text.replacen(
            "worker:\n",
            "worker:\n  max_cost_usd: 5\n  max_tokens: 200000\n",
            1,
        ),
    )
    .unwrap();
    let spent = orch::store::usage::Usage {
        cost_usd: 0.42,
        tokens: orch::store::usage::Tokens {
            input: 50_000,
            ..Default::default()
        },
        invocations: 1,
        ..Default::default()
    };
    orch::store::Store::open(&org.state)
        .unwrap()
        .write(|tx| orch::store::usage::save_usage(tx, &id, &spent, orch::store::now_ms()))
        .unwrap();
    let s = serve(&org, "127.0.0.1:0");
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let where_is = format!(
        "const c = document.querySelector('.card[data-worker=\"{id}\"]'); return c ? c.closest('section').dataset.need + ' ' + c.dataset.milestone : null;"
    );
    browser.go(&format!("http://{}/", s.addr));
    browser.wait_for(
        "the card in Working",
        &where_is,
        &json!("working WORKING"),
        Duration::from_secs(20),
    );
    browser.wait_for(
        "the page to say it is live",
        "return document.getElementById('conn').textContent",
        &json!("live"),
        Duration::from_secs(20),
    );
    browser.screenshot("board");

    // A filter URL round-trips: the form shows it and the card of another repository is gone.
    browser.go(&format!(
        "http://{}/?view=board&repo=vm&need=working",
        s.addr
    ));
    browser.wait_for("the filtered board", "return [document.querySelector('form#filter').repo.value, document.querySelector('form#filter').need.value, document.querySelectorAll('.card').length, document.querySelectorAll('section.group').length]", &json!(["vm", "working", 0, 1]), Duration::from_secs(20));
    // And the other way: the form filled and sent makes that URL, which shows the card.
    browser.go(&format!("http://{}/", s.addr));
    browser.wait_for(
        "the card in Working",
        &where_is,
        &json!("working WORKING"),
        Duration::from_secs(20),
    );
    browser.js("const f = document.querySelector('form#filter'); f.repo.value = 'core'; f.need.value = 'working'; f.requestSubmit(); return null");
    browser.wait_for(
        "the filter in the URL",
        "return location.search",
        &json!("?repo=core&need=working"),
        Duration::from_secs(20),
    );
    browser.wait_for(
        "the card under the filter",
        &where_is,
        &json!("working WORKING"),
        Duration::from_secs(20),
    );

    // On a phone: nothing wider than the screen.
    browser.size(390, 844);
    browser.go(&format!("http://{}/", s.addr));
    browser.wait_for(
        "the card on a phone",
        &where_is,
        &json!("working WORKING"),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true)
    );
    browser.screenshot("board-phone");
    browser.size(1280, 900);

    // The worker's view and the graph render.
    browser.go(&format!("http://{}/?worker={id}", s.addr));
    browser.wait_for("the worker view", "const h = document.getElementById('worker-title'); return h ? h.textContent.split(' ')[0] : null", &json!(id), Duration::from_secs(20));
    // Its live log: the line the worker printed, and orch's events in their place.
    browser.wait_for(
        "the worker's line in its live log",
        "const l = document.getElementById('log'); return (!!l && [...l.children].some(d => d.textContent === 'WORKING: idle for idle on the board') && l.querySelectorAll('.orch').length > 0) || [document.getElementById('log-state')?.textContent, l?.textContent]",
        &json!(true),
        Duration::from_secs(20),
    );
    // Its spend beside the budget the board loaded.
    browser.wait_for(
        "the spend beside the budget",
        "const b = document.getElementById('budget'); return b ? [b.textContent.replace(/\\s+/g, ' ').trim(), b.dataset.used, b.querySelectorAll('meter').length] : null",
        &json!(["budget $0.42 of $5.00 8% · 50000 of 200000 tokens 25%", "8 25", 2]),
        Duration::from_secs(20),
    );
    browser.screenshot("worker");
    // The worker's view on a phone: its log wraps, nothing wider than the screen.
    browser.size(390, 844);
    browser.go(&format!("http://{}/?worker={id}", s.addr));
    browser.wait_for(
        "the worker's log on a phone",
        "const l = document.getElementById('log'); return !!l && l.children.length > 0",
        &json!(true),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true)
    );
    browser.screenshot("worker-phone");
    browser.size(1280, 900);
    browser.go(&format!("http://{}/?view=graph", s.addr));
    red_base(&org, "core");
    browser.wait_for("the graph with core locked and its base branch red", "const g = [...document.querySelectorAll('g.repo')]; return g.map(x => x.dataset.repo + ' ' + x.dataset.locked + ' ' + x.dataset.ci).concat([...document.querySelectorAll('tr[data-base-ci]')].map(r => r.textContent.includes('red: unit')))", &json!(["core held red", "vm covered ", true]), Duration::from_secs(20));
    browser.screenshot("graph");
    // The nodes: this host, beaten by the spawn, marked as the board's own.
    browser.go(&format!("http://{}/?view=nodes", s.addr));
    let node = org.json(&["nodes", "--json"])["this_node"].clone();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    browser.wait_for(
        "the nodes view with this node",
        "const r = [...document.querySelectorAll('#nodes tr[data-node]')]; return r.map(x => [x.dataset.node, x.className, x.cells[0].textContent, x.cells[1].textContent, x.cells[2].textContent.endsWith(' ago'), x.cells[3].textContent, x.cells[4].textContent])",
        &json!([[node, "this", format!("{} (this node)", node.as_str().unwrap()), host.trim(), true, "1", "8"]]),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return document.querySelector('nav a.on').dataset.view"),
        json!("nodes")
    );
    // (No repository filter there: a node is not a repository's.)
    assert_eq!(
        browser.js("return getComputedStyle(document.getElementById('filter')).display"),
        json!("none")
    );
    browser.screenshot("nodes");

    // A milestone change made by the CLI reaches the open page within 2 s.
    browser.go(&format!("http://{}/", s.addr));
    browser.wait_for(
        "the card in Working",
        &where_is,
        &json!("working WORKING"),
        Duration::from_secs(20),
    );
    browser.wait_for(
        "live",
        "return document.getElementById('conn').textContent",
        &json!("live"),
        Duration::from_secs(20),
    );
    let out = org.run(&["cancel", &id, "--reason", "browser test"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let took = browser.wait_for(
        "the card in Done",
        &where_is,
        &json!("done CANCELLED"),
        Duration::from_secs(10),
    );
    assert!(
        took < Duration::from_secs(2),
        "the page changed {took:?} after the cancel"
    );

    // Every view so far: no console error, nothing loaded from beyond the board.
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.assert_loopback_only();

    // The server gone: the page says so plainly, and comes back with it.
    drop(s);
    browser.wait_for(
        "the page to say the connection is lost",
        "return document.getElementById('conn').textContent.startsWith('connection lost')",
        &json!(true),
        Duration::from_secs(20),
    );
    let _again = serve(&org, &format!("127.0.0.1:{port}"));
    browser.wait_for(
        "the page to reconnect",
        "return document.getElementById('conn').textContent",
        &json!("live"),
        Duration::from_secs(30),
    );
    let errors = browser.js("return window.__errors || []");
    assert_eq!(errors, json!([]));
}

/// The states of the organisation every view is rendered for: (repository, task, the
/// worker's milestone, the board's group). Each repository its own chain, so every worker
/// holds a lock of its own.
const EVERY_STATE: [(&str, &str, &str, &str); 10] = [
    ("working", "works on [hang]", "WORKING", "working"),
    (
        "pushed",
        "pushes and waits [pushed]",
        "PUSHED_TO_CI",
        "awaiting_ci",
    ),
    (
        "fixing",
        "pushes a red commit [fixing]",
        "FIXING_CI",
        "ci_red",
    ),
    ("done", "lands a feature", "DONE", "done"),
    ("landing", "lands a feature", "DONE", "landing"),
    ("blocked", "gives up [fail]", "BLOCKED", "human"),
    (
        "permission",
        "is denied [perm]",
        "BLOCKED_PERMISSION",
        "human",
    ),
    ("paused", "works on [hang]", "PAUSED", "human"),
    ("failed", "goes quiet [hang]", "FAILED", "human"),
    ("cancelled", "works on [hang]", "CANCELLED", "done"),
];

/// Every view in a real browser for an organisation with a worker in every state, each
/// brought there by a real worker through the binary (tests/workers/board_worker.sh): the
/// attention board with each card in its group (and a wave task waiting for a chain lock),
/// the graph with the locks and the fatal hold, every worker's view with its milestone, the
/// waves and the alerts; no console error, nothing loaded from beyond loopback, a screenshot
/// of each under target/board-screenshots/every-state-*.png.
#[test]
fn every_view_renders_an_organisation_with_a_worker_in_every_state() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let t0 = Instant::now();
    // CI held by the test: the pushed worker's branch run until the end; the landing
    // worker's base-branch run of its change (its own branch's passes).
    let held = tempfile::tempdir().unwrap();
    let gate = held.path().join("never");
    let held_when = |cond: &str| {
        job(
            "check",
            &format!(
                "if {cond}; then while [ ! -e '{}' ]; do sleep 0.05; done; fi",
                gate.display()
            ),
        )
        .timeout(Some("10m"))
    };
    let sync = || job("radicle-push", "true").needs(&["check"]);
    let mut spec = Spec::local("board_worker.sh").max_parallel(16);
    spec.forge = ForgeSpec::Local(8);
    for (repo, ..) in EVERY_STATE {
        let r = RepoSpec::new(repo);
        spec = spec.repo(match repo {
            "pushed" => r
                .job(held_when("[ \"$ORCH_CI_REF\" != refs/heads/main ]"))
                .job(sync()),
            "fixing" => r.job(job("check", "[ ! -e broken.txt ]")).job(sync()),
            "landing" => r
                .job(held_when(
                    "[ \"$ORCH_CI_REF\" = refs/heads/main ] && [ -e feature.txt ]",
                ))
                .job(sync()),
            _ => r,
        });
    }
    let org = Org::new(spec);
    let mut ids = std::collections::BTreeMap::new();
    for (repo, task, ..) in EVERY_STATE {
        let id = if repo == "failed" {
            // Its own contract: WORKING times out in 3 s (no progress in the last second
            // extends it), and the worker is FAILED.
            let mut short = org.spec.clone().timeout("WORKING", "3s", "2s");
            short.progress_window = Some("1s".into());
            let contract = org.root.join("short-working.yaml");
            std::fs::write(&contract, crate::support::test_contract(&short)).unwrap();
            let v = org.json(&[
                "--contract",
                contract.to_str().unwrap(),
                "spawn",
                "--repo",
                repo,
                "--task",
                task,
                "--json",
            ]);
            v["worker_id"]
                .as_str()
                .expect("the failed one started")
                .to_string()
        } else {
            org.spawn_detached(repo, task)
        };
        ids.insert(repo, id);
    }
    // An operator's FATAL over the paused one's chain, and a cancel.
    let out = org.run(&[
        "fatal",
        "paused",
        "--reason",
        "a secret in the history",
        "--by",
        "ops",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let out = org.run(&["cancel", &ids["cancelled"], "--reason", "not needed"]);
    assert!(out.status.success(), "{}", output_text(&out));
    // A wave task on the blocked worker's chain: it waits for that lock.
    org.wait_milestone(&ids["blocked"], "BLOCKED", crate::support::DEADLINE);
    let wave = org.root.join("wave-s.yaml");
    std::fs::write(
        &wave,
        "name: wave-s\ntasks:\n  - {id: blocked-2, repo: blocked, task: \"after the blocked one\", estimate: 2m}\n",
    )
    .unwrap();
    let out = org.run(&["wave", "run", wave.to_str().unwrap(), "--tick"]);
    assert!(out.status.success(), "{}", output_text(&out));

    let s = serve(&org, "127.0.0.1:0");
    // Every worker in its state and group, as the API says (the board waits for the last of
    // them: the landing one's base run, the failed one's timeout).
    let want: Value = EVERY_STATE
        .iter()
        .map(|(repo, _, m, need)| (ids[repo].clone(), json!(format!("{need} {m}"))))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let grouped = |board: &Value| -> Value {
        let mut m = serde_json::Map::new();
        for g in board["groups"].as_array().unwrap() {
            for c in g["cards"].as_array().unwrap() {
                if let Some(id) = c["worker_id"].as_str() {
                    let milestone = c["milestone"].as_str().unwrap().split(' ').next().unwrap();
                    m.insert(
                        id.into(),
                        json!(format!("{} {milestone}", g["need"].as_str().unwrap())),
                    );
                }
            }
        }
        m.into()
    };
    let last = std::cell::RefCell::new(Value::Null);
    poll_until(
        "a worker in every state",
        Duration::from_secs(120),
        || {
            *last.borrow_mut() = get_json(&s, "/api/board");
            (grouped(&last.borrow()) == want).then_some(())
        },
        || format!("want {want}\nboard {}", last.borrow()),
    );
    let board = last.into_inner();
    let waiting = &board["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["need"] == "waiting")
        .unwrap()["cards"];
    assert_eq!(waiting[0]["wave"], "wave-s:blocked-2", "{board}");
    let (_, fixing) = card_of(&board, &ids["fixing"]).unwrap();
    let m = fixing["milestone"].as_str().unwrap();
    assert!(m.starts_with("FIXING_CI ") && m.ends_with("/5"), "{fixing}");
    assert!(
        fixing["action"]
            .as_str()
            .unwrap()
            .starts_with("orch ci logs --repo fixing"),
        "{fixing}"
    );
    let (_, paused) = card_of(&board, &ids["paused"]).unwrap();
    assert_eq!(paused["milestone"], "PAUSED (FATAL)", "{paused}");
    eprintln!("every state reached after {:?}", t0.elapsed());

    // The attention board: each card in its group's section, the waiting task in Waiting.
    browser.go(&format!("http://{}/", s.addr));
    browser.wait_for(
        "every card in its group on the page",
        "const m = {}; for (const c of document.querySelectorAll('.card[data-worker]')) if (c.dataset.worker) m[c.dataset.worker] = c.closest('section').dataset.need + ' ' + c.dataset.milestone.split(' ')[0]; return m",
        &want,
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return [...document.querySelectorAll('section[data-need=waiting] .card')].map(c => c.textContent.includes('waits for the chain lock on blocked held by'))"),
        json!([true])
    );
    // Each group's count says how many cards it shows.
    assert_eq!(
        browser.js("return [...document.querySelectorAll('section.group')].map(g => g.dataset.need + ' ' + g.querySelector('.n').textContent + ' ' + g.querySelectorAll('.card').length)"),
        json!(["human 4 4", "ci_red 1 1", "waiting 1 1", "working 1 1", "awaiting_ci 1 1", "landing 1 1", "done 2 2"])
    );
    // Tall enough for every group in one picture.
    browser.size(1280, 1400);
    browser.screenshot("every-state-board");
    browser.size(1280, 900);

    // The graph: the chains locked as the API says, the fatal hold named.
    let graph = get_json(&s, "/api/graph");
    let mut held: Vec<String> = graph["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["repo"].as_str().unwrap().to_string())
        .collect();
    held.sort();
    let mut expect_held: Vec<&str> = EVERY_STATE
        .iter()
        .map(|e| e.0)
        .filter(|r| !["done", "cancelled"].contains(r))
        .collect();
    expect_held.sort();
    assert_eq!(held, expect_held, "{graph}");
    browser.go(&format!("http://{}/?view=graph", s.addr));
    browser.wait_for(
        "the graph with every repository and its lock",
        "const g = [...document.querySelectorAll('g.repo')]; return g.length ? g.filter(x => x.dataset.locked === 'held').map(x => x.dataset.repo).sort().concat([g.length, document.querySelectorAll('tr[data-lock]').length]) : null",
        &json!(
            expect_held
                .iter()
                .map(|r| json!(r))
                .chain([json!(EVERY_STATE.len()), json!(expect_held.len())])
                .collect::<Vec<_>>()
        ),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return [...document.querySelectorAll('p.red')].map(p => p.textContent)"),
        json!(["paused: a secret in the history (ops)"])
    );
    // The lock table offers Release only for the holders not at work.
    assert_eq!(
        browser.js("return [...document.querySelectorAll('tr[data-lock]')].filter(t => t.querySelector('button[data-act$=\"/release\"]')).map(t => t.dataset.lock).sort()"),
        json!(
            expect_held
                .iter()
                .filter(|r| !["working", "pushed", "fixing", "paused"].contains(r))
                .collect::<Vec<_>>()
        )
    );
    browser.screenshot("every-state-graph");

    // Every worker's view: its title names it and its milestone; its log and events shown.
    for (repo, _, milestone, _) in EVERY_STATE {
        let id = &ids[repo];
        browser.go(&format!("http://{}/?worker={id}", s.addr));
        browser.wait_for(
            &format!("the view of the {repo} worker"),
            "const h = document.getElementById('worker-title'); const l = document.getElementById('log'); return h && l && l.children.length > 0 ? h.textContent : null",
            &json!(format!("{id} {milestone}")),
            Duration::from_secs(20),
        );
        assert_eq!(
            browser.js("return [...document.querySelectorAll('main table')].at(-1).querySelectorAll('tr').length > 0"),
            json!(true),
            "{repo}: its events"
        );
        // Release is offered where there is a lock to release, never to a worker at work (a
        // running WORKING, PUSHED_TO_CI or FIXING_CI worker, or a PAUSED one): `orch release
        // --force` refuses those.
        let record = org.worker(id);
        let at_work =
            orch::app::operator::is_at_work(record.progress.milestone, record.worker_running);
        assert_eq!(
            at_work,
            ["working", "pushed", "fixing", "paused"].contains(&repo),
            "{repo}: at work as the test brought it there"
        );
        assert_eq!(
            browser.js("return !!document.querySelector('button[data-act$=\"/release\"]')"),
            json!(expect_held.contains(&repo) && !at_work),
            "{repo}: the Release button"
        );
        // What its state shows beside the milestone: the red verdict being fixed, the landing.
        let shown = match repo {
            "fixing" => Some("return document.querySelector('main table td.red').textContent"),
            "landing" | "done" => Some(
                "return [...document.querySelectorAll('main p')].map(p => p.textContent).find(t => t.includes('landing: ')).split('landing: ')[1].split(' ').slice(0, 2).join(' ')",
            ),
            _ => None,
        };
        if let Some(script) = shown {
            let want = match repo {
                "fixing" => "red",
                "landing" => "base CI",
                _ => "landed",
            };
            assert_eq!(
                browser.js(script).as_str().map(|t| t.starts_with(want)),
                Some(true),
                "{repo}: {}",
                browser.js(script)
            );
        }
        assert_eq!(browser.js("return window.__errors"), json!([]), "{repo}");
        browser.screenshot(&format!("every-state-worker-{repo}"));
    }

    // The waves: the waiting task's bar planned, not started, and what it waits for.
    browser.go(&format!("http://{}/?view=waves", s.addr));
    browser.wait_for(
        "the wave's Gantt chart",
        "const g = document.querySelector('svg.gantt[data-wave=\"wave-s\"]'); return g ? [...g.querySelectorAll('g.bar')].map(b => b.dataset.task + ' ' + b.querySelectorAll('rect.planned').length + ' ' + b.querySelectorAll('rect.actual').length) : null",
        &json!(["blocked-2 1 0"]),
        Duration::from_secs(20),
    );
    let waits = browser
        .js("return document.querySelector('tr[data-task=\"blocked-2\"] td.waits').textContent");
    assert!(
        waits.as_str().is_some_and(|w| w.starts_with(&format!(
            "the chain lock on blocked held by {}",
            ids["blocked"]
        ))),
        "{waits}"
    );
    browser.screenshot("every-state-waves");

    // The alerts: what the stopped workers raised.
    browser.go(&format!("http://{}/?view=alerts", s.addr));
    let kinds = std::cell::RefCell::new(Value::Null);
    poll_until(
        "the alerts of the stopped workers",
        Duration::from_secs(20),
        || {
            *kinds.borrow_mut() = browser.js(
                "return [...document.querySelectorAll('main table tr td:nth-child(4)')].map(t => t.textContent)",
            );
            let k = kinds.borrow();
            let shown = k.as_array()?;
            [
                "blocked",
                "blocked_permission",
                "timeout",
                "fatal",
                "halted",
            ]
            .iter()
            .all(|want| shown.iter().any(|s| s == want))
            .then_some(())
        },
        || format!("{}", kinds.borrow()),
    );
    browser.screenshot("every-state-alerts");

    assert_eq!(browser.js("return window.__errors"), json!([]));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.assert_loopback_only();
    eprintln!("every view rendered after {:?}", t0.elapsed());
}

#[test]
fn a_cancel_from_the_board_needs_both_tokens_and_is_audited() {
    let (mut org, id) = org_with_a_worker();
    let url = |s: &Served| format!("http://{}/api/workers/{id}/cancel", s.addr);
    let body = json!({"by": "alice", "reason": "from the board"});
    {
        // Without serve.token_env the board is read-only.
        let s = serve(&org, "127.0.0.1:0");
        let (code, text) = http("POST", &url(&s), &[], Some(&body));
        assert_eq!(code, 403, "{text}");
        assert!(text.contains("read-only"), "{text}");
    }
    let token = "board-token-for-actions-0123";
    with_token(&mut org, token);
    let s = serve(&org, "127.0.0.1:0");
    let csrf = csrf_of(&s);
    assert_eq!(csrf.len(), 32, "{csrf}");
    let bearer = format!("Bearer {token}");
    let origin = format!("http://{}", s.addr);
    for (headers, why) in [
        (vec![("x-orch-csrf", csrf.as_str())], "token"),
        (vec![("authorization", bearer.as_str())], "CSRF"),
        (
            vec![("authorization", bearer.as_str()), ("x-orch-csrf", "0123")],
            "CSRF",
        ),
        (
            vec![
                ("authorization", bearer.as_str()),
                ("x-orch-csrf", csrf.as_str()),
                ("origin", "http://evil.example"),
            ],
            "another site",
        ),
    ] {
        let (code, text) = http("POST", &url(&s), &headers, Some(&body));
        assert_eq!(code, 403, "{headers:?}: {text}");
        assert!(text.contains(why), "{headers:?}: {text}");
    }
    assert_eq!(
        org.json(&["status", "--json"])["workers"][0]["milestone"],
        "WORKING"
    );
    let (code, text) = http(
        "POST",
        &url(&s),
        &[
            ("authorization", &bearer),
            ("x-orch-csrf", &csrf),
            ("origin", &origin),
        ],
        Some(&body),
    );
    assert_eq!(code, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["by"], "board:alice");
    let shown = org.json(&["sessions", "show", &id, "--json"]);
    assert_eq!(shown["milestone"], "CANCELLED");
    assert!(
        shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["detail"]
                .as_str()
                .is_some_and(|d| d.contains("board:alice"))),
        "no audit entry naming board:alice: {}",
        shown["events"]
    );
    // Again: it has ended, as `orch cancel` says (404 no / 400 bad input, never a 200).
    let (code, _) = http(
        "POST",
        &url(&s),
        &[
            ("authorization", &bearer),
            ("x-orch-csrf", &csrf),
            ("origin", &origin),
        ],
        Some(&body),
    );
    assert_ne!(code, 200);
}

/// The board's token set in repos.yaml (`serve.token_env`) and exported for `org`'s commands.
pub fn with_token(org: &mut Org, token: &str) {
    let mut text = std::fs::read_to_string(&org.config_path).unwrap();
    text.push_str("\nserve:\n  token_env: ORCH_BOARD_TOKEN\n");
    std::fs::write(&org.config_path, text).unwrap();
    org.set_env("ORCH_BOARD_TOKEN", token);
}

/// The page's CSRF token, as the page carries it.
fn csrf_of(s: &Served) -> String {
    let (_, page) = http("GET", &format!("http://{}/", s.addr), &[], None);
    page.split("name=\"orch-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string()
}

/// One action as the page sends it (token, CSRF token, Origin of the board): (status, JSON).
fn act(s: &Served, token: &str, csrf: &str, path: &str, body: Value) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    let origin = format!("http://{}", s.addr);
    let (code, text) = http(
        "POST",
        &format!("http://{}{path}", s.addr),
        &[
            ("authorization", &bearer),
            ("x-orch-csrf", csrf),
            ("origin", &origin),
        ],
        Some(&body),
    );
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"));
    (code, v)
}

/// Whether `id`'s history has an event whose detail contains `text`.
fn audited(org: &Org, id: &str, text: &str) -> bool {
    org.json(&["sessions", "show", id, "--json"])["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["detail"].as_str().is_some_and(|d| d.contains(text)))
}

/// Respawn, wave retry, release, hold, unhold and wave cancel from the board: each refused
/// (403) without the token, the CSRF token or from another Origin; with them, each answers
/// what the command's `--json` answers, changes the state as the command does and leaves an
/// audit entry naming `board:<by>`.
#[test]
fn every_action_from_the_board_goes_through_its_command_and_is_audited() {
    let mut org = Org::new(
        Spec::local("wave_worker.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"]))
            .repo(RepoSpec::new("sdk")),
    );
    let wave = org.root.join("wave-b.yaml");
    std::fs::write(
        &wave,
        "name: wave-b\ntasks:\n  - {id: core-1, repo: core, task: \"core [fail]\"}\n  - {id: vm-1, repo: vm, task: \"vm\"}\n",
    )
    .unwrap();
    let tick = |org: &Org| {
        let out = org.run(&["wave", "run", wave.to_str().unwrap(), "--tick"]);
        assert!(out.status.success(), "{}", output_text(&out));
    };
    tick(&org);
    let first = org.json(&["wave", "status", "wave-b", "--json"])["tasks"][0]["worker"]
        .as_str()
        .expect("core-1 started")
        .to_string();
    org.wait_milestone(&first, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&first);

    let actions = [
        (
            format!("/api/workers/{first}/respawn"),
            json!({"note": "n"}),
        ),
        (
            format!("/api/workers/{first}/release"),
            json!({"reason": "r"}),
        ),
        ("/api/repos/sdk/hold".to_string(), json!({"reason": "r"})),
        ("/api/repos/sdk/unhold".to_string(), json!({})),
        (
            "/api/waves/wave-b/retry".to_string(),
            json!({"task": "core-1"}),
        ),
        ("/api/waves/wave-b/cancel".to_string(), json!({})),
    ];
    {
        // Without serve.token_env the board is read-only.
        let s = serve(&org, "127.0.0.1:0");
        for (path, body) in &actions {
            let (code, text) = http("POST", &format!("http://{}{path}", s.addr), &[], Some(body));
            assert_eq!(code, 403, "{path}: {text}");
            assert!(text.contains("read-only"), "{path}: {text}");
        }
    }
    let token = "board-token-for-every-action-42";
    with_token(&mut org, token);
    let s = serve(&org, "127.0.0.1:0");
    let csrf = csrf_of(&s);
    let bearer = format!("Bearer {token}");
    for (path, body) in &actions {
        for (headers, why) in [
            (vec![("x-orch-csrf", csrf.as_str())], "token"),
            (vec![("authorization", bearer.as_str())], "CSRF"),
            (
                vec![
                    ("authorization", bearer.as_str()),
                    ("x-orch-csrf", csrf.as_str()),
                    ("origin", "http://evil.example"),
                ],
                "another site",
            ),
        ] {
            let (code, text) = http(
                "POST",
                &format!("http://{}{path}", s.addr),
                &headers,
                Some(body),
            );
            assert_eq!(code, 403, "{path} {headers:?}: {text}");
            assert!(text.contains(why), "{path} {headers:?}: {text}");
        }
    }
    // Nothing refused changed anything.
    let status = org.json(&["status", "--json"]);
    assert_eq!(status["workers"][0]["milestone"], "BLOCKED");
    assert_eq!(status["locks"].as_array().unwrap().len(), 1);
    assert_eq!(
        org.json(&["wave", "status", "wave-b", "--json"])["cancelled"],
        false
    );

    // Respawn: the BLOCKED worker goes on (and, told to fail, blocks again).
    let (code, v) = act(
        &s,
        token,
        &csrf,
        &format!("/api/workers/{first}/respawn"),
        json!({"by": "alice", "note": "try once more"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["by"], "board:alice");
    assert_eq!(v["worker_id"], first.as_str());
    assert_eq!(v["milestone"], "WORKING");
    assert!(v["new_worker"].is_null());
    assert!(audited(&org, &first, "board:alice"), "no respawn audit");
    org.wait_milestone(&first, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&first);
    // A respawn the command refuses is refused alike (a WORKING or ended worker: 404 "no").
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/workers/no-such-worker/respawn",
        json!({"by": "alice"}),
    );
    assert_ne!(code, 200, "{v}");

    // Wave retry: the stopped task's lock released, the task to start again.
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/waves/wave-b/retry",
        json!({"by": "carol", "task": "core-1"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["previous_worker"], first.as_str());
    assert_eq!(v["released_lock"], true);
    assert!(
        audited(&org, &first, "by board:carol"),
        "no wave retry audit"
    );
    assert_eq!(org.json(&["status", "--json"])["locks"], json!([]));

    // Release: the next attempt blocks with its lock held; the board releases it (a reason
    // is required, as the command's).
    tick(&org);
    let second = org.json(&["wave", "status", "wave-b", "--json"])["tasks"][0]["worker"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second, first);
    org.wait_milestone(&second, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&second);
    let path = format!("/api/workers/{second}/release");
    let (code, v) = act(&s, token, &csrf, &path, json!({"by": "dave"}));
    assert_eq!(code, 400, "{v}");
    let (code, v) = act(
        &s,
        token,
        &csrf,
        &path,
        json!({"by": "dave", "reason": "taking it over by hand"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v,
        json!({"worker_id": second, "released": true, "repo": "core", "by": "board:dave",
            "reason": "taking it over by hand"})
    );
    assert!(audited(&org, &second, "forced by board:dave"));
    assert_eq!(org.json(&["status", "--json"])["locks"], json!([]));

    // Hold and unhold a repository.
    let (_, text) = http("GET", &format!("http://{}/metrics", s.addr), &[], None);
    assert_eq!(
        sample(&parse_metrics(&text).0, "orch_locks_held{kind=\"hold\"}"),
        0.0
    );
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/repos/sdk/hold",
        json!({"by": "erin", "reason": "release freeze"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["held"], true);
    let locks = org.json(&["status", "--json"])["locks"].clone();
    assert_eq!(locks[0]["holder"], "hold:board:erin");
    assert_eq!(locks[0]["by"], "board:erin");
    assert_eq!(locks[0]["reason"], "release freeze");
    // /metrics reads the store again after the change (it keeps what it read while the
    // store does not change).
    poll_until(
        "the hold in /metrics",
        Duration::from_secs(10),
        || {
            let (_, text) = http("GET", &format!("http://{}/metrics", s.addr), &[], None);
            let (samples, _) = parse_metrics(&text);
            (sample(&samples, "orch_locks_held{kind=\"hold\"}") == 1.0).then_some(())
        },
        String::new,
    );
    // Held already: the command's answer (held: false, who is in the way) with 409.
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/repos/sdk/hold",
        json!({"by": "erin", "reason": "again"}),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["held"], false);
    assert_eq!(v["blockers"][0]["holder"], "hold:board:erin");
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/repos/sdk/unhold",
        json!({"by": "frank"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["released"], true);
    assert_eq!(org.json(&["status", "--json"])["locks"], json!([]));
    let history = orch::store::Store::open(&org.state)
        .unwrap()
        .lock_history()
        .unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.repo.as_str(), last.by.as_deref()),
        ("release", "sdk", Some("board:frank"))
    );
    let (code, _) = act(&s, token, &csrf, "/api/repos/sdk/unhold", json!({}));
    assert_eq!(code, 404);

    // Wave cancel: nothing more of it starts.
    let (code, v) = act(
        &s,
        token,
        &csrf,
        "/api/waves/wave-b/cancel",
        json!({"by": "gina"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["wave"], "wave-b");
    assert_eq!(v["newly_cancelled"], true);
    assert_eq!(
        org.json(&["wave", "status", "wave-b", "--json"])["cancelled"],
        true
    );
    let (code, _) = act(&s, token, &csrf, "/api/waves/no-such/cancel", json!({}));
    assert_ne!(code, 200);
}

/// The waves view in a real browser: the Gantt chart (planned and actual bars), what the task
/// still to start waits for, the critical path; a Retry clicked on the page (signed in with
/// the board's token) goes through `orch wave retry` and is audited; the alerts view renders.
#[test]
fn the_waves_view_draws_the_gantt_chart_and_a_retry_from_the_page_is_audited() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let mut org = Org::new(
        Spec::local("wave_worker.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"])),
    );
    let wave = org.root.join("wave-g.yaml");
    std::fs::write(
        &wave,
        "name: wave-g\ntasks:\n  - {id: core-1, repo: core, task: \"core [fail]\", estimate: 2m}\n  - {id: vm-1, repo: vm, task: \"vm\", estimate: 5m}\n",
    )
    .unwrap();
    let out = org.run(&["wave", "run", wave.to_str().unwrap(), "--tick"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let first = org.json(&["wave", "status", "wave-g", "--json"])["tasks"][0]["worker"]
        .as_str()
        .unwrap()
        .to_string();
    org.wait_milestone(&first, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&first);
    let token = "board-token-for-the-waves-view";
    with_token(&mut org, token);
    let s = serve(&org, "127.0.0.1:0");

    // The API: planned after core-1 for vm-1, and why vm-1 is not running.
    let waves = get_json(&s, "/api/waves");
    let w = &waves[0];
    assert_eq!(
        w["status"],
        org.json(&["wave", "status", "wave-g", "--json"])
    );
    assert_eq!(w["critical_path"], json!(["core-1", "vm-1"]));
    assert_eq!(w["gantt"][1]["planned_start_s"], 120.0);
    assert_eq!(w["gantt"][1]["planned_end_s"], 420.0);
    assert!(w["gantt"][0]["actual_start_s"].is_number(), "{w}");
    assert!(w["gantt"][1]["actual_start_s"].is_null(), "{w}");
    assert_eq!(w["gantt"][1]["waits_for"], "upstream: core-1 (BLOCKED)");
    // Its progress in /metrics: core-1 stopped, vm-1 pending, no success yet.
    let (_, text) = http("GET", &format!("http://{}/metrics", s.addr), &[], None);
    let (samples, _) = parse_metrics(&text);
    for (progress, n) in [("stopped", 1.0), ("pending", 1.0), ("done", 0.0)] {
        let series = format!("orch_wave_tasks{{wave=\"wave-g\",progress=\"{progress}\"}}");
        assert_eq!(sample(&samples, &series), n, "{series}");
    }
    assert!(!text.contains("orch_wave_last_success_timestamp_seconds{"));

    // Sign in: the page's actions carry the login cookie.
    browser.sign_in(&s, token);
    browser.go(&format!("http://{}/?view=waves", s.addr));
    browser.wait_for(
        "the Gantt chart",
        "const g = document.querySelector('svg.gantt[data-wave=\"wave-g\"]'); return g ? [...g.querySelectorAll('g.bar')].map(b => b.dataset.task + ' ' + b.dataset.critical + ' ' + b.querySelectorAll('rect.planned').length + ' ' + b.querySelectorAll('rect.actual').length) : null",
        &json!(["core-1 true 1 1", "vm-1 true 1 0"]),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return document.querySelector('tr[data-task=\"vm-1\"] td.waits').textContent"),
        json!("upstream: core-1 (BLOCKED)")
    );
    assert_eq!(
        browser.js("return document.querySelector('section.wave p.critical b').textContent"),
        json!("core-1 → vm-1")
    );
    browser.screenshot("waves");

    // Retry core-1 from the page: the page asks who (a prompt, answered here).
    browser.js("window.prompt = () => 'hana'; document.querySelector('tr[data-task=\"core-1\"] button[data-act]').click(); return null");
    poll_until(
        "the wave retry from the page",
        Duration::from_secs(20),
        || {
            org.json(&["wave", "status", "wave-g", "--json"])["tasks"][0]["worker"]
                .is_null()
                .then_some(())
        },
        || format!("{}", org.json(&["wave", "status", "wave-g", "--json"])),
    );
    assert!(audited(
        &org,
        &first,
        "wave retry of wave-g:core-1 by board:hana"
    ));
    browser.wait_for(
        "the page to say what happened",
        "return document.getElementById('toast').textContent.startsWith('Retry: ')",
        &json!(true),
        Duration::from_secs(20),
    );

    browser.go(&format!("http://{}/?view=alerts&since=30d", s.addr));
    browser.wait_for(
        "the alerts view",
        "return document.querySelectorAll('main table tr').length > 1",
        &json!(true),
        Duration::from_secs(20),
    );
    browser.screenshot("alerts");
    assert_eq!(browser.js("return window.__errors || []"), json!([]));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.assert_loopback_only();
}

/// A cancel clicked on the worker's page (signed in): the worker ends as `orch cancel` ends
/// it, its history names who asked (`board:<name>`), the page shows it ended; Sign out leads
/// back to the sign-in.
#[test]
fn a_cancel_clicked_on_the_page_ends_the_worker_and_is_audited() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let (mut org, id) = org_with_a_worker();
    let token = "board-token-for-a-click-on-cancel";
    with_token(&mut org, token);
    let s = serve(&org, "127.0.0.1:0");
    browser.sign_in(&s, token);
    browser.go(&format!("http://{}/?worker={id}", s.addr));
    browser.wait_for(
        "the Cancel button",
        "return !!document.querySelector('button[data-act$=\"/cancel\"]')",
        &json!(true),
        Duration::from_secs(20),
    );
    // No budget in its repos.yaml: the worker view says so beside the spend.
    assert_eq!(
        browser.js("const b = document.getElementById('budget'); return [b.textContent, b.querySelectorAll('meter').length]"),
        json!(["no budget", 0])
    );
    // The page asks who and why (prompts, answered here).
    browser.js("const said = ['ines', 'cancelled from the page']; window.prompt = () => said.shift(); document.querySelector('button[data-act$=\"/cancel\"]').click(); return null");
    org.wait_milestone(&id, "CANCELLED", crate::support::DEADLINE);
    assert!(
        audited(&org, &id, "board:ines"),
        "no audit naming board:ines"
    );
    browser.wait_for(
        "the page to show it cancelled",
        "const h = document.getElementById('worker-title'); return h ? h.textContent.includes('CANCELLED') : null",
        &json!(true),
        Duration::from_secs(20),
    );
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.assert_loopback_only();
    browser.js("document.querySelector('form#signout').submit(); return null");
    browser.wait_for(
        "the sign-in page",
        "return location.pathname",
        &json!("/login"),
        Duration::from_secs(20),
    );
}

/// Before anything ran here no node has beaten: `/api/nodes` lists none (still `orch nodes
/// --json`'s view) and the nodes view says so plainly, naming this node.
#[test]
fn the_nodes_view_says_when_no_node_has_beaten_yet() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let org = Org::new(Spec::local("idle.sh").repo(RepoSpec::new("core")));
    let s = serve(&org, "127.0.0.1:0");
    let nodes = get_json(&s, "/api/nodes");
    assert_valid("nodes", &nodes);
    assert_eq!(nodes["nodes"], json!([]), "{nodes}");
    assert_eq!(nodes, org.json(&["nodes", "--json"]));
    let this = nodes["this_node"].as_str().unwrap();
    browser.go(&format!("http://{}/?view=nodes", s.addr));
    browser.wait_for(
        "the nodes view saying no node has beaten",
        "const p = document.getElementById('no-nodes'); return p ? p.textContent : null",
        &json!(format!(
            "no node has recorded a heartbeat yet (this one is {this}): one appears once a supervisor renewed its lease or orch resume or orch spawn ran"
        )),
        Duration::from_secs(20),
    );
    assert_eq!(browser.js("return window.__errors"), json!([]));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.screenshot("nodes-none");
}

/// Two nodes on the nodes view: this one, and node `gone`, whose worker's lease ran out a
/// minute ago (its supervisor stopped): marked lapsed, due for takeover, with the
/// organisation's total beside them — what `orch nodes --json` says.
#[test]
fn the_nodes_view_marks_a_lapsed_node_among_several() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("lib")),
    );
    let here = org.spawn_detached("core", "idle here");
    let out = org
        .cmd(&[
            "spawn",
            "--repo",
            "lib",
            "--task",
            "idle elsewhere",
            "--json",
        ])
        .env("ORCH_NODE", "gone")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let far: Value = serde_json::from_slice(&out.stdout).unwrap();
    let far = far["worker_id"].as_str().unwrap().to_string();
    let sup = poll_until(
        "the other node's supervisor",
        crate::support::DEADLINE,
        || org.worker(&far).supervisor_pid,
        || org.diag(&far),
    ) as i32;
    let signal = |sig| {
        // SAFETY: a signal to the supervisor this test started (through orch).
        unsafe { libc::kill(sup, sig) };
    };
    // Its supervisor stopped outside a write (a renewal takes milliseconds); its lease and its
    // node's last heartbeat a minute back, as a minute after the node died.
    poll_until(
        "node gone's lease and heartbeat moved back",
        crate::support::DEADLINE,
        || {
            signal(libc::SIGSTOP);
            let moved = org.store().write(|tx| {
                Ok(tx.execute(
                    "UPDATE nodes SET heartbeat_ms = heartbeat_ms - 60000 WHERE name = 'gone'",
                    [],
                )? + tx.execute(
                    "UPDATE workers SET lease_until_ms = lease_until_ms - 60000 WHERE id = ?1",
                    [&far],
                )?)
            });
            if moved.is_err() {
                signal(libc::SIGCONT);
            }
            moved.ok().filter(|n| *n == 2)
        },
        || org.diag(&far),
    );
    let s = serve(&org, "127.0.0.1:0");
    let nodes = get_json(&s, "/api/nodes");
    assert_valid("nodes", &nodes);
    assert_eq!(nodes["running"], 2, "{nodes}");
    let this = nodes["this_node"].as_str().unwrap().to_string();
    let lapsed: Vec<(String, bool)> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_string(), n["lapsed"] == true))
        .collect();
    let mut want = vec![("gone".to_string(), true), (this.clone(), false)];
    want.sort();
    assert_eq!(lapsed, want, "{nodes}");
    browser.go(&format!("http://{}/?view=nodes", s.addr));
    browser.wait_for(
        "the nodes view with node gone lapsed",
        "const r = [...document.querySelectorAll('#nodes tr[data-node]')]; return r.map(x => [x.dataset.node, x.classList.contains('lapsed'), x.cells[0].textContent.includes('lapsed: due for takeover')]).sort()",
        &json!(want.iter().map(|(n, l)| json!([n, l, l])).collect::<Vec<_>>()),
        Duration::from_secs(20),
    );
    assert_eq!(
        browser.js("return document.querySelector('div.wrap + p.meta').textContent.startsWith('2 worker(s) running on all nodes')"),
        json!(true)
    );
    assert_eq!(browser.js("return window.__errors"), json!([]));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.screenshot("nodes-lapsed");
    signal(libc::SIGCONT);
    for id in [&here, &far] {
        let _ = org.run(&["cancel", id, "--reason", "test over"]);
    }
}
