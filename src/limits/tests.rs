//! The limiter on a clock the tests move: bursts, sustained rates, compute units,
//! plans and IPv6 callers.

use super::*;

fn limiter(horizon: u64) -> Limiter {
    let conf = LimitsConf {
        horizon_secs: horizon,
        sketch_slots: 1024,
        ..Default::default()
    };
    let plans: Vec<String> = ["free", "basic", "pro", "business", "enterprise", "scale"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    Limiter::new(&conf, &plans)
}

#[test]
fn burst_of_twice_the_rate_after_idle_then_refused() {
    let l = limiter(10);
    let caller = Caller::Tenant { id: "t1", rank: 0 }; // free: 10 rps
    for i in 0..20 {
        assert!(l.check(&caller, "eth_read").admitted, "request {i}");
    }
    let d = l.check(&caller, "eth_read");
    assert!(!d.admitted);
    assert_eq!(d.limit_rps, 10.0);
    assert_eq!(d.remaining, 0);
    assert!(d.retry_after_sec >= 1);
    // Another tenant and another category have their own budgets.
    assert!(
        l.check(&Caller::Tenant { id: "t2", rank: 0 }, "eth_read")
            .admitted
    );
    assert!(l.check(&caller, "sol_read").admitted);
}

/// Offer `rps` for `secs` on a simulated clock; returns the admitted rate.
fn drive(l: &Limiter, id: &str, rps: f64, secs: f64, t0: f64) -> (f64, usize) {
    let caller = Caller::Tenant { id, rank: 0 };
    let (mut ok, mut refused) = (0, 0);
    let n = (rps * secs) as usize;
    for i in 0..n {
        let t = t0 + i as f64 / rps;
        let limit = l.limit_rps(&caller, "c");
        let d = l.check_at(&caller, "c", limit, 1, t.floor() as u64, t.fract());
        if d.admitted {
            ok += 1;
        } else {
            refused += 1;
        }
    }
    (ok as f64 / secs, refused)
}

#[test]
fn sustained_never_refused_and_overdrive_held_near_the_rate() {
    let l = limiter(10); // free: 10 rps
    assert_eq!(drive(&l, "steady", 10.0, 60.0, 100.25).1, 0);
    let (rate, _) = drive(&l, "over", 30.0, 60.0, 100.6);
    assert!((10.0..=11.5).contains(&rate), "3x held to {rate}");
    let (rate, _) = drive(&l, "over10s", 30.0, 10.0, 300.9);
    assert!((10.0..=12.5).contains(&rate), "3x over 10 s held to {rate}");
}

#[test]
fn compute_units_limit_apart_from_requests_and_refunds_give_back() {
    let conf = LimitsConf {
        sketch_slots: 1024,
        compute_units: [("free".to_string(), 100.0)].into_iter().collect(),
        ..Default::default()
    };
    let mut l = Limiter::new(&conf, &["free".to_string(), "pro".to_string()]);
    l.set_clock(ManualClock::default());
    let free = Caller::Tenant { id: "t", rank: 0 };
    // Burst 2x: 200 units in the first second, then refused.
    assert!(l.check_compute_units(&free, 150).unwrap().admitted);
    let d = l.check_compute_units(&free, 75).unwrap();
    assert!(!d.admitted && d.limit_rps == 100.0 && d.retry_after_sec >= 1);
    assert!(l.check_compute_units(&free, 50).unwrap().admitted);
    // Plans not listed, and calls that cost nothing, are not limited by units.
    let pro = Caller::Tenant { id: "p", rank: 1 };
    assert_eq!(l.check_compute_units(&pro, 1_000_000), None);
    assert_eq!(l.check_compute_units(&free, 0), None);
    // A refund gives requests back: 20 admitted (burst), refund 5, 5 more admitted.
    for _ in 0..20 {
        assert!(l.check(&free, "c").admitted);
    }
    assert!(!l.check(&free, "c").admitted);
    l.refund(&free, "c", 5);
    for i in 0..5 {
        assert!(l.check(&free, "c").admitted, "after refund {i}");
    }
    assert!(!l.check(&free, "c").admitted);
}

#[test]
fn plans_and_anonymous_take_their_own_rates() {
    let l = limiter(10);
    assert_eq!(
        l.limit_rps(&Caller::Tenant { id: "x", rank: 5 }, "c"),
        1000.0
    );
    assert_eq!(
        l.limit_rps(&Caller::Address("10.0.0.1".parse().unwrap()), "c"),
        5.0
    );
}

#[test]
fn ipv6_callers_share_a_slash_64() {
    let l = limiter(10);
    let a = Caller::Address("2001:db8:1:2::1".parse().unwrap());
    let b = Caller::Address("2001:db8:1:2::ffff".parse().unwrap());
    let c = Caller::Address("2001:db8:1:3::1".parse().unwrap());
    assert_eq!(l.key(&a, "x"), l.key(&b, "x"));
    assert_ne!(l.key(&a, "x"), l.key(&c, "x"));
}
