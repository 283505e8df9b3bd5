//! The control channel: a Unix socket speaking JSON lines, one answer line per request line.
//! Commands (docs/FAULT-LAYER.md): `ping`, `add` (a rule: its id), `remove`, `release`,
//! `clear`, `list`, `hits`, `log`, `unmount`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::fs::Inner;
use crate::rules::RuleSpec;

/// One request line.
#[derive(Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
enum Command {
    Ping,
    Add { rule: Box<RuleSpec> },
    Remove { id: u64 },
    Release { id: u64 },
    Clear,
    List,
    Hits { id: u64 },
    Log { since: Option<u64> },
    Unmount,
}

/// Serve `listener` until the process ends: a thread per connection. `unmount` is what the
/// `unmount` command calls.
pub fn serve(
    listener: UnixListener,
    fs: Arc<Inner>,
    name: String,
    unmount: Arc<dyn Fn() + Send + Sync>,
) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (fs, name, unmount) = (fs.clone(), name.clone(), unmount.clone());
        std::thread::spawn(move || {
            let _ = connection(conn, &fs, &name, &*unmount);
        });
    }
}

fn connection(conn: UnixStream, fs: &Inner, name: &str, unmount: &dyn Fn()) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    for line in BufReader::new(conn).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut stop = false;
        let answer = match serde_json::from_str::<Command>(&line) {
            Err(e) => json!({ "ok": false, "error": format!("bad command: {e}") }),
            Ok(Command::Unmount) => {
                stop = true;
                json!({ "ok": true })
            }
            Ok(cmd) => run(cmd, fs, name),
        };
        let mut text = answer.to_string();
        text.push('\n');
        out.write_all(text.as_bytes())?;
        if stop {
            // Answered first: the unmount ends this process.
            unmount();
        }
    }
    Ok(())
}

fn run(cmd: Command, fs: &Inner, name: &str) -> Value {
    let rules = &fs.rules;
    let missing = |id: u64| json!({ "ok": false, "error": format!("no rule {id}") });
    match cmd {
        Command::Ping => json!({ "ok": true, "name": name, "pid": std::process::id() }),
        Command::Add { rule } => match rules.add(*rule) {
            Ok(id) => json!({ "ok": true, "id": id }),
            Err(e) => json!({ "ok": false, "error": e }),
        },
        Command::Remove { id } => {
            if rules.remove(id) {
                json!({ "ok": true })
            } else {
                missing(id)
            }
        }
        Command::Release { id } => match rules.release(id) {
            Some(n) => json!({ "ok": true, "released": n }),
            None => missing(id),
        },
        Command::Clear => {
            rules.clear();
            json!({ "ok": true })
        }
        Command::List => json!({ "ok": true, "rules": rules.list() }),
        Command::Hits { id } => match rules.get(id) {
            Some(r) => json!({
                "ok": true,
                "matched": r["matched"],
                "fired": r["fired"],
                "hanging": r["hanging"],
                "active": r["active"],
            }),
            None => missing(id),
        },
        Command::Log { since } => {
            json!({ "ok": true, "entries": rules.log_since(since.unwrap_or(0)) })
        }
        Command::Unmount => json!({ "ok": true }),
    }
}
