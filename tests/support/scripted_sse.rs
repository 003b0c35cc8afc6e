//! The loopback HTTP server under both fake model APIs (Anthropic Messages, OpenAI Responses):
//! reads requests (content-length or chunked bodies), hands each to the API's own answer
//! function and writes what it says — a 404, a JSON body, or a server-sent event stream that
//! ends the connection — recording every streamed answer as [`Seen`].

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the fake saw of one request it answered with a stream.
#[derive(Debug, Clone)]
pub struct Seen {
    pub body: Value,
    /// The script turn it answered (None: a side request).
    pub turn: Option<usize>,
    /// When the answer was fully written.
    pub answered: Instant,
    /// The same, in Unix milliseconds (as orch's events are stamped).
    pub answered_ms: i64,
}

/// An API's answer to one request.
pub enum Answer {
    NotFound,
    /// `200 application/json` with this body; the connection stays open.
    Json(String),
    /// `200 text/event-stream`, then the connection closes; recorded with the script turn.
    Stream {
        sse: String,
        turn: Option<usize>,
    },
    /// An HTTP error (`401`, `429`…) with this JSON body and, when given, `retry-after`
    /// seconds; the connection stays open.
    Error {
        status: u16,
        body: String,
        retry_after: Option<u32>,
    },
    /// `200 text/event-stream` with these events, then nothing more: the connection is held
    /// open, as a model that stalls mid-answer, until the client closes it.
    Hang {
        sse: String,
        turn: Option<usize>,
    },
}

/// One request: its method, path and JSON body (null when it is not JSON).
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Value,
}

type AnswerFn = dyn Fn(&Request) -> Answer + Send + Sync;

/// A running fake: its base URL and what it streamed.
pub struct ScriptedServer {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Every HTTP error answered ([`Answer::Error`]): its status and when.
    pub errors: Arc<Mutex<Vec<(u16, Instant)>>>,
}

impl ScriptedServer {
    /// Listens on 127.0.0.1 (any port); `url_path` is appended to the base URL the test hands
    /// the agent (e.g. `/v1` for OpenAI-style base URLs).
    pub fn start(
        url_path: &str,
        answer: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    ) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}{url_path}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<AnswerFn> = Arc::new(answer);
        let (s, e) = (seen.clone(), errors.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (answer, seen, errors) = (answer.clone(), s.clone(), e.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &*answer, &seen, &errors);
                });
            }
        });
        ScriptedServer { url, seen, errors }
    }

    /// The HTTP errors answered so far, by status.
    pub fn errors_answered(&self, status: u16) -> usize {
        self.errors
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| *s == status)
            .count()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// When the answer with script turn `n` was last written.
    pub fn answered(&self, n: usize) -> Option<Instant> {
        self.seen()
            .iter()
            .filter(|s| s.turn == Some(n))
            .map(|s| s.answered)
            .next_back()
    }
}

fn serve(
    stream: TcpStream,
    answer: &AnswerFn,
    seen: &Mutex<Vec<Seen>>,
    errors: &Mutex<Vec<(u16, Instant)>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader)? {
        match answer(&request) {
            Answer::NotFound => {
                write!(out, "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")?;
            }
            Answer::Json(b) => {
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    b.len()
                )?;
                out.write_all(b.as_bytes())?;
            }
            Answer::Error {
                status,
                body,
                retry_after,
            } => {
                let retry = retry_after
                    .map(|s| format!("retry-after: {s}\r\n"))
                    .unwrap_or_default();
                write!(
                    out,
                    "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\n{retry}content-length: {}\r\n\r\n",
                    body.len()
                )?;
                out.write_all(body.as_bytes())?;
                out.flush()?;
                errors.lock().unwrap().push((status, Instant::now()));
            }
            Answer::Stream { sse, turn } => {
                write_stream(&mut out, &sse, request.body, turn, seen)?;
                return Ok(());
            }
            Answer::Hang { sse, turn } => {
                write_stream(&mut out, &sse, request.body, turn, seen)?;
                // Until the client goes: a read that ends (EOF or error) is its close.
                let mut sink = [0u8; 1024];
                while matches!(std::io::Read::read(reader.get_mut(), &mut sink), Ok(n) if n > 0) {}
                return Ok(());
            }
        }
    }
    Ok(())
}

/// A 200 event stream carrying `sse`, recorded as [`Seen`].
fn write_stream(
    out: &mut TcpStream,
    sse: &str,
    body: Value,
    turn: Option<usize>,
    seen: &Mutex<Vec<Seen>>,
) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
    )?;
    out.write_all(sse.as_bytes())?;
    out.flush()?;
    seen.lock().unwrap().push(Seen {
        body,
        turn,
        answered: Instant::now(),
        answered_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    });
    Ok(())
}

/// The next request on the connection; None when the client closed it.
fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(None);
    }
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let mut b = vec![0; length];
        reader.read_exact(&mut b)?;
        b
    };
    let mut words = request_line.split(' ');
    Ok(Some(Request {
        method: words.next().unwrap_or("").to_string(),
        path: words.next().unwrap_or("").to_string(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }))
}

fn read_chunked(r: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size)?;
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        let mut chunk = vec![0; n + 2];
        r.read_exact(&mut chunk)?;
        if n == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

/// A scripted text with `{cwd}` (the agent's working directory) and `{last}` (the last tool
/// output the request carries) filled in.
pub fn fill(s: &str, cwd: &str, last: &str) -> String {
    s.replace("{cwd}", cwd).replace("{last}", last)
}

/// [`fill`] on every string of a scripted tool input.
pub fn fill_value(v: &Value, cwd: &str, last: &str) -> Value {
    match v {
        Value::String(s) => Value::String(fill(s, cwd, last)),
        Value::Array(a) => Value::Array(a.iter().map(|x| fill_value(x, cwd, last)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), fill_value(x, cwd, last)))
                .collect(),
        ),
        other => other.clone(),
    }
}
