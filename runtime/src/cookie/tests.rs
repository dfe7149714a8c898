//! The cookie hides its value and refuses unusable strings.

use super::*;

#[test]
fn cookie_never_prints_its_value() {
    let cookie = Cookie::new("SECRETVALUE123\n").unwrap();
    assert_eq!(cookie.reveal(), "SECRETVALUE123");
    for shown in [
        format!("{cookie}"),
        format!("{cookie:?}"),
        format!("{cookie:#?}"),
        format!("{:?}", Some(&cookie)),
    ] {
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}

#[test]
fn cookie_refuses_empty_long_and_spaced_values() {
    assert_eq!(Cookie::new("  \n"), Err(CookieError::Empty));
    assert_eq!(
        Cookie::new(&"x".repeat(MAX_COOKIE_LEN + 1)),
        Err(CookieError::TooLong {
            len: MAX_COOKIE_LEN + 1
        })
    );
    assert_eq!(Cookie::new("a b"), Err(CookieError::BadCharacter));
    let error = Cookie::new("se cret").unwrap_err().to_string();
    assert!(!error.contains("cret"), "{error}");
}
