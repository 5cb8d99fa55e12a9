//! This data dir among the others that share an index: the machine's name, the home's id, and
//! the signing keys every home registered. Below every area: the context needs them.

/// This machine's name.
pub fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".into()
    }
}

/// This data dir's name among all that share an index: `<host>-<8 hex>`, made once and kept in
/// `$GIT_SANDBOX_HOME/home-id`. It names the notes ref this home pushes its results through
/// and prefixes the id of every daemon and runner of this home (so a daemon that holds the
/// home's lock knows which claimed jobs were its dead predecessor's).
pub fn home_id(home: &std::path::Path) -> String {
    let file = home.join("home-id");
    let valid = |s: &str| {
        !s.is_empty() && s.len() <= 80 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if let Ok(s) = std::fs::read_to_string(&file) {
        if valid(s.trim()) {
            return s.trim().to_string();
        }
    }
    let host: String = host()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let id = format!("{}-{}", host.trim_matches('-'), gs_util::random_hex(4));
    let _ = std::fs::create_dir_all(home);
    // The first writer wins: a second process that raced us reads its id.
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{id}\n").as_bytes()));
    if created.is_ok() {
        return id;
    }
    match std::fs::read_to_string(&file) {
        Ok(s) if valid(s.trim()) => s.trim().to_string(),
        // Garbage in the file (a hand edit): replaced, so the id stays stable from now on.
        _ => {
            let _ = gs_util::write_atomic(&file, format!("{id}\n").as_bytes());
            id
        }
    }
}

/// On a shared index: register this data dir's signing key, and return every key registered
/// (home id, public key), whose records are the fleet's own. A file index has no fleet.
pub fn registered_keys(
    ctx: &super::Context,
    keys: &gs_trust::Keyring,
) -> super::Result<Vec<(String, String)>> {
    if !ctx.index.is_shared() {
        return Ok(Vec::new());
    }
    let mine = (keys.home_id.clone(), keys.public_key());
    let registered = ctx.index.signing_keys()?;
    if registered.contains(&mine) {
        return Ok(registered);
    }
    // Written only when missing or changed: an upsert would lock the row in every process of
    // this home, inside whatever transaction it runs (a daemon's threads would wait on each
    // other).
    ctx.index.register_signing_key(&mine.0, &mine.1)?;
    Ok(ctx.index.signing_keys()?)
}

/// This home's spool (`$GIT_SANDBOX_HOME/spool`), where a commit's hook writes the branches it
/// moved without starting a process (`intake::spool` takes them in).
pub fn spool_dir(home: &std::path::Path) -> std::path::PathBuf {
    home.join("spool")
}

/// Make this home's spool (only this user may write into it), so that the hooks write there.
pub fn make_spool(home: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::create_dir_all(home)?;
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .create(spool_dir(home))
    {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}
