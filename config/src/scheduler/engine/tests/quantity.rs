//! Quantity parsing and rounding, and Go-exact logarithms.

use crate::scheduler::engine::go_log;
use crate::scheduler::engine::quantity::{Amount, parse};

fn amount(text: &str) -> Amount {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn decimal_and_binary_suffixes() {
    assert_eq!(amount("100m").milli_value(), 100);
    assert_eq!(amount("100m").value(), 1, "Value() rounds up");
    assert_eq!(amount("2").milli_value(), 2000);
    assert_eq!(amount("1.5Gi").value(), 1_610_612_736);
    assert_eq!(amount("8Gi").value(), 8 * 1024 * 1024 * 1024);
    assert_eq!(amount("200Mi").value(), 209_715_200);
    assert_eq!(amount("1k").value(), 1000);
    assert_eq!(amount("1M").value(), 1_000_000);
    assert_eq!(amount("3T").value(), 3_000_000_000_000);
    assert_eq!(amount("1E").value(), 1_000_000_000_000_000_000);
    assert_eq!(amount("1Ei").value(), 1_152_921_504_606_846_976);
    assert_eq!(amount("1.G").value(), 1_000_000_000);
    assert_eq!(amount(".5").milli_value(), 500);
}

#[test]
fn exponents_and_signs() {
    assert_eq!(amount("1e3").value(), 1000);
    assert_eq!(amount("1E3").value(), 1000);
    assert_eq!(amount("12e-1").milli_value(), 1200);
    assert_eq!(amount("+2").value(), 2);
    assert_eq!(amount("-1").value(), -1);
    assert_eq!(amount("-1500m").value(), -2, "rounding is away from zero");
    assert_eq!(amount("0").value(), 0);
    assert_eq!(
        amount("m").value(),
        0,
        "a bare suffix is zero, as apimachinery parses it"
    );
}

#[test]
fn sub_unit_precision_rounds_up() {
    assert_eq!(amount("0.1Ki").value(), 103, "102.4 bytes round up");
    assert_eq!(amount("1n").milli_value(), 1);
    assert_eq!(amount("500u").milli_value(), 1);
    assert_eq!(
        amount("0.0000000001Ki").nano(),
        103,
        "1.024e-7 rounds up to 103 nano-units"
    );
    assert_eq!(amount("1e-12").nano(), 1, "anything non-zero is at least one nano-unit");
    let sum = amount("400u")
        .saturating_add(amount("400u"))
        .saturating_add(amount("400u"));
    assert_eq!(sum.milli_value(), 2, "1.2m summed exactly rounds to 2m");
}

#[test]
fn malformed_quantities_are_errors() {
    for bad in ["", "1Mb", "abc", "1.2.3", "1e", "1 Gi", "Gi1", "1Kii", "--1"] {
        let error = parse(bad).expect_err(bad);
        assert_eq!(error.input, bad);
    }
    assert_eq!(parse("1Kii").unwrap_err().reason, "unable to parse quantity's suffix");
    assert_eq!(parse("1e").unwrap_err().reason, "unable to parse quantity's suffix");
    assert!(parse("1Mb").unwrap_err().reason.starts_with("quantities must match"));
    assert!(
        parse("abc")
            .unwrap_err()
            .to_string()
            .starts_with("invalid quantity `abc`: quantities must match")
    );
}

#[test]
fn go_log_is_bit_exact_where_libm_differs() {
    // Bit patterns printed by Go 1.26 `math.Log` on amd64; Rust's `ln` (libm) differs in the last bit for 3, 14, 48.
    for (x, bits) in [
        (2.0, 0x3fe6_2e42_fefa_39ef_u64),
        (3.0, 0x3ff1_93ea_7aad_030a),
        (14.0, 0x4005_1cca_16d7_bba8),
        (48.0, 0x400e_f838_3c50_bb74),
        (1002.0, 0x401b_a396_5d40_5f5f),
    ] {
        assert_eq!(go_log(x).to_bits(), bits, "log({x})");
    }
    assert_ne!(
        3.0f64.ln().to_bits(),
        0x3ff1_93ea_7aad_030a,
        "libm differs here, hence the port"
    );
    assert!(go_log(0.0).is_infinite() && go_log(-1.0).is_nan());
}
