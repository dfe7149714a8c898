//! Cookie sources: precedence, and files created with mode 0600, read back, refused when
//! others may read them, own them, or may replace them (their directory). The environment
//! variable's value is passed in, not set, and so is the user the files must belong to.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cookie-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn file_args(path: &Path) -> CookieArgs {
    CookieArgs {
        cookie: None,
        cookie_file: Some(path.to_owned()),
    }
}

#[test]
fn a_missing_file_is_created_private_and_then_reused() {
    let dir = scratch("create");
    let path = dir.join("sub").join("cookie");
    let args = file_args(&path);
    assert!(args.resolve_with(None, Missing::Fail).is_err());
    let created = args.resolve_with(None, Missing::Create).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = fs::metadata(path.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.trim().len(), GENERATED_LEN);
    assert!(
        text.trim()
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    );
    assert_eq!(args.resolve_with(None, Missing::Fail).unwrap(), created);
    assert_ne!(random_cookie().unwrap(), random_cookie().unwrap());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_others_can_read_or_write_is_refused() {
    let dir = scratch("mode");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cookie");
    fs::write(&path, "SECRETCOOKIE\n").unwrap();
    for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        let error = format!(
            "{:#}",
            file_args(&path)
                .resolve_with(None, Missing::Create)
                .unwrap_err()
        );
        assert!(error.contains("accessible by group or others"), "{error}");
        assert!(error.contains("chmod 600"), "{error}");
        assert!(!error.contains("SECRET"), "{error}");
    }
    fs::set_permissions(&path, fs::Permissions::from_mode(0o400)).unwrap();
    assert_eq!(
        file_args(&path).resolve_with(None, Missing::Fail).unwrap(),
        Cookie::new("SECRETCOOKIE").unwrap()
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_flag_wins_over_the_environment_which_wins_over_the_file() {
    let dir = scratch("precedence");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cookie");
    fs::write(&path, "FROMFILE").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut args = file_args(&path);
    let cookie = |name: &str| Cookie::new(name).unwrap();
    assert_eq!(
        args.resolve_with(None, Missing::Fail).unwrap(),
        cookie("FROMFILE")
    );
    assert_eq!(
        args.resolve_with(Some("FROMENV"), Missing::Fail).unwrap(),
        cookie("FROMENV")
    );
    args.cookie = Some("FROMFLAG".into());
    assert_eq!(
        args.resolve_with(Some("FROMENV"), Missing::Fail).unwrap(),
        cookie("FROMFLAG")
    );
    fs::remove_dir_all(&dir).unwrap();

    let empty = CookieArgs {
        cookie: Some(" ".into()),
        cookie_file: None,
    };
    let error = format!("{:#}", empty.resolve_with(None, Missing::Fail).unwrap_err());
    assert_eq!(error, "invalid --cookie: the cookie is empty");
}

#[test]
fn a_file_another_user_owns_is_refused_saying_what_to_do() {
    let dir = scratch("owner");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cookie");
    fs::write(&path, "SECRETCOOKIE\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let metadata = fs::metadata(&path).unwrap();
    let owner = metadata.uid();
    check_file(&path, &metadata, owner).unwrap();
    // The same file as another user sees it (the tests may run as root: the user is passed
    // in).
    let other = owner + 1;
    let error = format!("{:#}", check_file(&path, &metadata, other).unwrap_err());
    let shown = path.display();
    assert_eq!(
        error,
        format!(
            "cookie file {shown} is owned by uid {owner}, not by this user (uid {other}), who may read and change it: run `chown {other} {shown} && chmod 600 {shown}` (as its owner or root), or use a cookie file of your own"
        )
    );
    // Through the command's path, as this user: accepted.
    assert_eq!(
        file_args(&path).resolve_with(None, Missing::Fail).unwrap(),
        Cookie::new("SECRETCOOKIE").unwrap()
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_others_own_or_may_write_to_is_refused_unless_sticky() {
    let dir = Path::new("/some/dir");
    let check = |owner: u32, mode: u32| {
        check_directory_owner_and_mode(dir, owner, mode, 1000).map_err(|e| format!("{e:#}"))
    };
    for mode in [0o700, 0o755, 0o1777] {
        assert_eq!(check(1000, mode), Ok(()), "{mode:o}");
        // root's directories are fine for anyone.
        assert_eq!(check(0, mode), Ok(()), "{mode:o}");
    }
    for mode in [0o775, 0o757, 0o777, 0o770] {
        assert_eq!(
            check(1000, mode),
            Err(format!(
                "the cookie file's directory /some/dir is writable by group or others (mode {:03o}), who may replace the cookie file: run `chmod go-w /some/dir`",
                mode & 0o777
            ))
        );
    }
    assert_eq!(
        check(1001, 0o700),
        Err(
            "the cookie file's directory /some/dir is owned by uid 1001, not by this user (uid 1000) or root, who may replace the cookie file: run `chown 1000 /some/dir` (as root), or use a cookie file in a directory of your own".to_owned()
        )
    );

    // Through the command's path: a cookie file in a directory others may write to.
    let dir = scratch("directory");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cookie");
    fs::write(&path, "SECRETCOOKIE\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    let error = format!(
        "{:#}",
        file_args(&path)
            .resolve_with(None, Missing::Fail)
            .unwrap_err()
    );
    assert!(error.contains("writable by group or others"), "{error}");
    assert!(!error.contains("SECRET"), "{error}");
    // And no cookie file is created there.
    let created = dir.join("new-cookie");
    let error = format!(
        "{:#}",
        file_args(&created)
            .resolve_with(None, Missing::Create)
            .unwrap_err()
    );
    assert!(error.contains("writable by group or others"), "{error}");
    assert!(!created.exists());
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    fs::remove_dir_all(&dir).unwrap();
}
