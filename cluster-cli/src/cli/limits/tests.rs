//! Byte sizes as people write them, and `/proc/meminfo`.

use super::*;

#[test]
fn sizes_take_plain_bytes_and_decimal_or_binary_units() {
    let cases = [
        ("1000000", 1_000_000),
        ("0", 0),
        ("500MB", 500_000_000),
        ("500mb", 500_000_000),
        ("8GiB", 8 << 30),
        ("8 GiB", 8 << 30),
        ("1.5GB", 1_500_000_000),
        ("2k", 2000),
        ("64KiB", 64 * 1024),
        ("1TB", 1_000_000_000_000),
        ("7b", 7),
    ];
    for (text, bytes) in cases {
        assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
    }
}

#[test]
fn sizes_that_are_not_sizes_or_overflow_are_refused() {
    for text in [
        "",
        "GB",
        "12XB",
        "-5",
        "1.2.3GB",
        "nanGB",
        "99999999999TB",
        "1e30",
    ] {
        assert!(parse_size(text).is_err(), "{text}");
    }
    let error = parse_size("3 parsecs").unwrap_err().to_string();
    assert!(error.contains("unknown unit"), "{error}");
}

#[test]
fn meminfo_gives_the_total_and_available_memory() {
    let text = "MemTotal:       16303616 kB\nMemFree:         1010000 kB\n\
                MemAvailable:   11410612 kB\nBuffers:          123456 kB\n";
    assert_eq!(
        parse_meminfo(text),
        Some(Memory {
            total: 16_303_616 * 1024,
            available: 11_410_612 * 1024,
        })
    );
    // Old kernels have no MemAvailable.
    let old = "MemTotal: 2048 kB\nMemFree: 1024 kB\n";
    assert_eq!(
        parse_meminfo(old),
        Some(Memory {
            total: 2048 * 1024,
            available: 1024 * 1024,
        })
    );
    assert_eq!(parse_meminfo("nothing here"), None);
}
