use super::*;

#[test]
fn schedule_matches_b17_b18() {
    let a = Policy::Async { retries: 10 };
    assert_eq!(a.attempts(), 11);
    let waits: Vec<u64> = (1..11).map(|k| a.wait(k).as_millis() as u64).collect();
    assert_eq!(waits, vec![25, 50, 100, 200, 400, 500, 500, 500, 500, 500]);
    assert_eq!(Policy::Sync { retries: 0 }.attempts(), 2);
    assert_eq!(Policy::Sync { retries: 3 }.attempts(), 4);
    assert_eq!(normalize_stale(None), 2000);
    assert_eq!(normalize_stale(Some(500.0)), 2000);
    assert_eq!(normalize_stale(Some(10_000.0)), 10_000);
}

#[test]
fn tokens_are_far_from_now_and_match_at_every_precision() {
    let t = new_token(123_456_789, 987_654_321);
    assert!(t > (1i128 << 31) * 1_000_000_000);
    assert!(t < ((1i128 << 31) + (1 << 30)) * 1_000_000_000);
    for p in [1, 100, 1_000, 1_000_000, 1_000_000_000] {
        assert!(token_matches(t, t - t.rem_euclid(p)));
    }
    assert!(!token_matches(t, t + 1));
    assert!(!token_matches(t, t - 1_000_000_001));
    assert_ne!(new_token(1, 0), new_token(2, 0));
}
