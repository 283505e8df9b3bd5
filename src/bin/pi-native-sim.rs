//! The lock simulator's command (`npm run sim`): explores seeds within a time budget and
//! prints the first failing seed with the command that replays it (docs/LOCKING.md).
//!
//! `pi-native-sim [--seed S | --from S] [--seeds N] [--seconds B] [--mutate NAME]… [--verbose]`

use std::time::{Duration, Instant};

use pi_native::store::lock::model::Mutations;
use pi_native::store::lock::sim::{self, Config};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut one: Option<u64> = None;
    let mut from: Option<u64> = None;
    let mut seeds = u64::MAX;
    let mut seconds = 60.0f64;
    let mut verbose = false;
    let mut trace = false;
    let mut m = Mutations::default();
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--seed" => one = Some(num(&val())),
            "--from" => from = Some(num(&val())),
            "--seeds" => seeds = num(&val()),
            "--seconds" => {
                seconds = val()
                    .parse()
                    .unwrap_or_else(|_| usage("--seconds: a number"))
            }
            "--verbose" => verbose = true,
            "--trace" => trace = true,
            "--mutate" => match val().as_str() {
                "repeat-rmdir" => m.repeat_rmdir = true,
                "mtime-identity" => m.mtime_identity = true,
                "no-private-name" => m.no_private_name = true,
                "forget-orphans" => m.forget_orphans = true,
                x => usage(&format!("unknown mutation {x}")),
            },
            "--help" | "-h" => usage(""),
            x => usage(&format!("unknown argument {x}")),
        }
    }
    if let Some(seed) = one {
        let mut cfg = Config::random(seed, m);
        cfg.trace = trace;
        let r = sim::run(&cfg);
        for line in &r.trace {
            println!("{line}");
        }
        print_report(&r, true);
        std::process::exit(if r.violations.is_empty() { 0 } else { 1 });
    }
    let first = from.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> 16
    });
    println!(
        "lock simulator: seeds from {first}, budget {seconds} s{}",
        if m == Mutations::default() {
            String::new()
        } else {
            format!(", mutations {m:?}")
        }
    );
    let started = Instant::now();
    let budget = Duration::from_secs_f64(seconds);
    let mut ran = 0u64;
    let mut totals = sim::check::Stats::default();
    let mut k = 0;
    while k < seeds && started.elapsed() < budget {
        let seed = first.wrapping_add(k);
        k += 1;
        let r = sim::run(&Config::random(seed, m));
        ran += 1;
        totals.steps += r.stats.steps;
        totals.calls += r.stats.calls;
        totals.publishes += r.stats.publishes;
        totals.takeovers += r.stats.takeovers;
        totals.races += r.stats.races;
        totals.reference += r.stats.reference;
        if verbose {
            print_report(&r, false);
        }
        if !r.violations.is_empty() {
            print_report(&r, true);
            println!(
                "FAILED after {ran} seeds in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            std::process::exit(1);
        }
    }
    println!(
        "ok: {ran} seeds in {:.1} s ({} steps, {} calls, {} publishes, {} takeovers, {} takeover races, {} proper-lockfile misdeeds counted)",
        started.elapsed().as_secs_f64(),
        totals.steps,
        totals.calls,
        totals.publishes,
        totals.takeovers,
        totals.races,
        totals.reference
    );
}

fn print_report(r: &sim::Report, full: bool) {
    let c = &r.config;
    println!(
        "seed {}: {} ({} natives, {} proper-lockfile, {} machines, {}{}{}{}): {} publishes, {} takeovers, {} races, {} counted",
        c.seed,
        if r.violations.is_empty() { "ok" } else { "VIOLATION" },
        c.natives,
        c.references,
        c.machines,
        if c.remote { "network" } else { "local" },
        if c.noreplace { ", no-replace rename" } else { "" },
        if c.whole_seconds { ", whole seconds" } else { "" },
        if c.keeps_atime { "" } else { ", no atime" },
        r.stats.publishes,
        r.stats.takeovers,
        r.stats.races,
        r.stats.reference
    );
    if full {
        for v in &r.violations {
            println!("  {v}");
        }
        if !r.violations.is_empty() {
            println!("  world: {c:?}");
        }
        println!("  replay: {}", c.replay());
    }
}

fn num(s: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| usage(&format!("not a number: {s}")))
}

fn usage(why: &str) -> ! {
    if !why.is_empty() {
        eprintln!("pi-native-sim: {why}");
    }
    eprintln!("usage: pi-native-sim [--seed S | --from S] [--seeds N] [--seconds B] [--mutate repeat-rmdir|mtime-identity|no-private-name|forget-orphans]… [--verbose]");
    std::process::exit(2);
}
