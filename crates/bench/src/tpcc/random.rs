//! TPC-C's random input and data generators (clause 4.3.2 and 2.1.6).
//!
//! Customer last names and the customer and item ids of the transactions are skewed with
//! NURand, a non-uniform distribution whose run-time constant `C` is fixed per run. The C used
//! to load `C_LAST` and the one used during the run must differ by an amount in [65, 119],
//! excluding 96 and 112 (2.1.6.1), so that lookups by last name do not hit exactly the
//! loaded skew; [`Constants::for_run`] picks a run constant that satisfies that.

use rand::Rng;

/// The syllables customer last names are built from (4.3.2.3).
const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// The run-time constants C of NURand for the three skewed fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constants {
    /// C for customer last names (A = 255).
    pub c_last: u32,
    /// C for customer ids (A = 1023).
    pub c_id: u32,
    /// C for order-line item ids (A = 8191).
    pub ol_i_id: u32,
}

impl Constants {
    /// Constants for loading the database.
    pub fn for_load(rng: &mut impl Rng) -> Constants {
        Constants { c_last: rng.gen_range(0..=255), c_id: rng.gen_range(0..=1023), ol_i_id: rng.gen_range(0..=8191) }
    }

    /// Constants for a run against data loaded with `load`: C_LAST differs by a permitted
    /// delta; the others are fresh.
    pub fn for_run(load: &Constants, rng: &mut impl Rng) -> Constants {
        loop {
            let c_last = rng.gen_range(0..=255u32);
            if valid_c_last_delta(load.c_last, c_last) {
                return Constants { c_last, c_id: rng.gen_range(0..=1023), ol_i_id: rng.gen_range(0..=8191) };
            }
        }
    }
}

/// Whether `run` may follow `load` as C for C_LAST (2.1.6.1).
pub fn valid_c_last_delta(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut impl Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

/// A customer id for a transaction: NURand(1023, 1, 3000).
pub fn customer_id(rng: &mut impl Rng, k: &Constants) -> u32 {
    nurand(rng, 1023, k.c_id, 1, 3000)
}

/// An item id for an order line: NURand(8191, 1, 100000).
pub fn item_id(rng: &mut impl Rng, k: &Constants) -> u32 {
    nurand(rng, 8191, k.ol_i_id, 1, 100_000)
}

/// The last name for a number in 0..=999: its three digits pick three syllables.
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    [n / 100, (n / 10) % 10, n % 10].iter().map(|d| SYLLABLES[*d as usize]).collect()
}

/// A last name for a transaction's lookup: from NURand(255, 0, 999).
pub fn random_last_name(rng: &mut impl Rng, k: &Constants) -> String {
    last_name(nurand(rng, 255, k.c_last, 0, 999))
}

/// The last name of loaded customer `c_id` (1-based): the first 1,000 customers of a district
/// cover every name once; the rest are NURand-skewed (4.3.3.1).
pub fn load_last_name(rng: &mut impl Rng, k: &Constants, c_id: u32) -> String {
    if c_id <= 1000 {
        last_name(c_id - 1)
    } else {
        random_last_name(rng, k)
    }
}

/// A random alphanumeric string of length in [min, max] (a-string).
pub fn a_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let len = rng.gen_range(min..=max);
    (0..len).map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char).collect()
}

/// A random numeric string of length in [min, max] (n-string).
pub fn n_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len).map(|_| char::from(b'0' + rng.gen_range(0..10u8))).collect()
}

/// A zip code: four random digits then "11111".
pub fn zip(rng: &mut impl Rng) -> String {
    format!("{}11111", n_string(rng, 4, 4))
}

/// I_DATA / S_DATA: an a-string of 26..=50 characters, 10% of them with "ORIGINAL" at a
/// random position (4.3.3.1).
pub fn data_with_original(rng: &mut impl Rng) -> String {
    let mut s = a_string(rng, 26, 50);
    if rng.gen_range(0..10) == 0 {
        let at = rng.gen_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// A random permutation of 1..=n (O_C_ID of the loaded orders).
pub fn permutation(rng: &mut impl Rng, n: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=n).collect();
    for i in (1..v.len()).rev() {
        let j = rng.gen_range(0..=i);
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        assert_eq!(last_name(40), "BARPRESBAR");
    }

    #[test]
    fn loaded_customers_cover_every_last_name_once_in_the_first_thousand() {
        let mut rng = StdRng::seed_from_u64(7);
        let k = Constants::for_load(&mut rng);
        let names: std::collections::HashSet<String> = (1..=1000).map(|c| load_last_name(&mut rng, &k, c)).collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = StdRng::seed_from_u64(42);
        let k = Constants::for_load(&mut rng);
        let mut counts = vec![0u32; 1000];
        let samples = 200_000;
        for _ in 0..samples {
            let v = nurand(&mut rng, 255, k.c_last, 0, 999);
            assert!(v <= 999);
            counts[v as usize] += 1;
        }
        // Uniform would give 200 per value; NURand's OR makes some values several times as
        // likely as others.
        let min = *counts.iter().min().expect("1000 counters");
        let max = *counts.iter().max().expect("1000 counters");
        assert!(max > 2 * samples / 1000, "max {max} shows no skew");
        assert!(min < samples / 1000, "min {min} shows no skew");
        for _ in 0..10_000 {
            let c = customer_id(&mut rng, &k);
            assert!((1..=3000).contains(&c));
            let i = item_id(&mut rng, &k);
            assert!((1..=100_000).contains(&i));
        }
    }

    #[test]
    fn run_constant_for_last_names_keeps_the_required_distance_from_the_load_one() {
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..1000 {
            let load = Constants::for_load(&mut rng);
            let run = Constants::for_run(&load, &mut rng);
            let d = load.c_last.abs_diff(run.c_last);
            assert!((65..=119).contains(&d) && d != 96 && d != 112, "delta {d}");
        }
        assert!(!valid_c_last_delta(100, 196));
        assert!(valid_c_last_delta(100, 165));
    }

    #[test]
    fn strings_have_the_requested_shape() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..1000 {
            let a = a_string(&mut rng, 8, 16);
            assert!((8..=16).contains(&a.len()) && a.chars().all(|c| c.is_ascii_alphanumeric()));
            let z = zip(&mut rng);
            assert!(z.len() == 9 && z.ends_with("11111") && z.chars().all(|c| c.is_ascii_digit()));
            let d = data_with_original(&mut rng);
            assert!((26..=50).contains(&d.len()));
        }
        let with_original = (0..10_000).filter(|_| data_with_original(&mut rng).contains("ORIGINAL")).count();
        assert!((700..1300).contains(&with_original), "{with_original} of 10000 contain ORIGINAL");
        let mut p = permutation(&mut rng, 3000);
        p.sort_unstable();
        assert_eq!(p, (1..=3000).collect::<Vec<_>>());
    }
}
