//! What the board tells whom (issue 34): a loopback board answers only requests naming a
//! loopback host (a page whose name was rebound to 127.0.0.1 is refused), its token is
//! redacted in every view whatever a task's text carries, and where workers run isolated from
//! orch on the host (`worker.users`, `worker.sandbox`) it needs its token on loopback too.

use super::board::{Events, get_json, http, serve, with_token};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll, worker_account};

fn org() -> Org {
    Org::new(Spec::local("idle.sh").repo(RepoSpec::new("core")))
}

#[test]
fn a_loopback_board_refuses_a_host_name_that_is_not_loopback() {
    let org = org();
    let id = org.spawn_detached("core", "idle on the board");
    let s = serve(&org, "127.0.0.1:0");
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let url = format!("http://{}/api/workers", s.addr);
    // What a rebinding page's fetch sends: its own name.
    let evil = format!("rebound.example:{port}");
    let (status, body) = http("GET", &url, &[("Host", &evil)], None);
    assert_eq!(status, 421, "{body}");
    assert!(!body.contains(&id), "{body}");
    for ok in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (status, body) = http("GET", &url, &[("Host", &ok)], None);
        assert_eq!(status, 200, "{ok}: {body}");
        assert!(body.contains(&id), "{body}");
    }
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

#[test]
fn the_boards_token_is_redacted_in_every_view() {
    let mut org = org();
    let token = "board-token-in-a-task-0123456789";
    with_token(&mut org, token);
    let id = org.spawn_detached("core", &format!("deploy with {token} please"));
    let s = serve(&org, "127.0.0.1:0");
    let bearer = format!("Bearer {token}");
    for path in [
        "/api/workers".to_string(),
        format!("/api/workers/{id}"),
        "/api/board".to_string(),
    ] {
        let (status, body) = http(
            "GET",
            &format!("http://{}{path}", s.addr),
            &[("Authorization", &bearer)],
            None,
        );
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains(&id), "{path}: {body}");
        assert!(!body.contains(token), "{path} shows the token: {body}");
        assert!(
            !body.contains("board-token-in"),
            "{path} shows a piece of it: {body}"
        );
    }
    let first = Events::open_with(&s, &format!("Authorization: {bearer}\r\n")).next_board();
    let text = first.to_string();
    assert!(text.contains(&id), "{text}");
    assert!(
        !text.contains(token),
        "the first event shows the token: {text}"
    );
    // Loopback without a token still answers (no isolated workers here) — redacted too.
    let _ = get_json(&s, "/api/workers");
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

#[test]
fn with_isolated_workers_the_board_needs_its_token_on_loopback() {
    let Some(account) = worker_account() else {
        return;
    };
    let mut org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core"))
            .user(&account.name),
    );
    // Refused before it listens; a board that started anyway is killed at the deadline.
    let mut child = org
        .cmd(&["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ended = poll(DEADLINE, || child.try_wait().unwrap());
    if ended.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        ended.and_then(|s| s.code()),
        Some(2),
        "orch serve with workers isolated on this host and no token: {}",
        output_text(&out)
    );
    assert!(
        output_text(&out).contains("worker.users or worker.sandbox"),
        "{}",
        output_text(&out)
    );
    let token = "board-token-for-isolated-workers-42";
    with_token(&mut org, token);
    let s = serve(&org, "127.0.0.1:0");
    let url = format!("http://{}/api/workers", s.addr);
    let (status, _) = http("GET", &url, &[], None);
    assert_eq!(status, 401, "a worker on the host reaches loopback too");
    let (status, body) = http(
        "GET",
        &url,
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(status, 200, "{body}");
}
