//! Fuzz test of the packet decoders: arbitrary bytes must decode or fail with an error,
//! never panic (a panic would kill the connection task; a hang would stall the client).

use proptest::prelude::*;
use strata_server::codec::{parse_command, parse_execute_params, parse_handshake_response, Reader};

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn commands_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_command(&bytes);
    }

    #[test]
    fn handshake_responses_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = parse_handshake_response(&bytes);
    }

    #[test]
    fn execute_params_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        count in 0usize..12,
        known_types in any::<bool>(),
    ) {
        let mut types = if known_types { vec![(0xfd, false); count] } else { Vec::new() };
        let mut long = vec![None; count];
        let _ = parse_execute_params(&bytes, count, &mut types, &mut long);
    }

    #[test]
    fn lenenc_strings_never_overrun(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
        let mut r = Reader::new(&bytes);
        if let Ok(s) = r.lenenc_bytes() {
            prop_assert!(s.len() <= bytes.len());
        }
    }
}

#[test]
fn execute_packets_with_huge_declared_lengths_are_errors() {
    // A string parameter claiming 2^56 bytes.
    let body = [0u8, 1, 0, 0, 0, 0, 1, 0xfd, 0, 0xfe, 0, 0, 0, 0, 0, 0, 0, 1];
    let mut types = Vec::new();
    let mut long = vec![None];
    assert!(parse_execute_params(&body, 1, &mut types, &mut long).is_err());
}

#[test]
fn time_parameters_beyond_the_time_range_are_clamped() {
    // flags, iterations, null bitmap, new-bound flag, type TIME (0x0b), then the value:
    // length 12, negative, 2^32-1 days, 23:59:59.999999.
    let mut body = vec![0u8, 1, 0, 0, 0, 0, 1, 0x0b, 0, 12, 1];
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&[23, 59, 59]);
    body.extend_from_slice(&999_999u32.to_le_bytes());
    let mut types = Vec::new();
    let mut long = vec![None];
    let got = parse_execute_params(&body, 1, &mut types, &mut long).expect("decodes");
    let max = (838 * 3600 + 59 * 60 + 59) * 1_000_000i64;
    assert_eq!(got, vec![strata_common::value::Value::Time(-max)]);
}
