//! UTC calendar formatting of Unix-epoch nanoseconds, without a date-time dependency: the
//! RFC 3339 text of [`crate::Bundle::captured_at`] and the compact stamp that starts a run id.

/// `2026-11-21T23:56:36Z` for `epoch_ns`.
pub fn rfc3339_utc(epoch_ns: i64) -> String {
    let (date, (h, m, s)) = civil(epoch_ns);
    format!(
        "{}-{:02}-{:02}T{h:02}:{m:02}:{s:02}Z",
        date.0, date.1, date.2
    )
}

/// `20261121-235636` for `epoch_ns` (for run ids).
pub fn compact_utc(epoch_ns: i64) -> String {
    let (date, (h, m, s)) = civil(epoch_ns);
    format!("{}{:02}{:02}-{h:02}{m:02}{s:02}", date.0, date.1, date.2)
}

type Date = (i64, u32, u32);
type Clock = (u32, u32, u32);

fn civil(epoch_ns: i64) -> (Date, Clock) {
    let secs = epoch_ns.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    (
        civil_from_days(days),
        (rem / 3600, (rem % 3600) / 60, rem % 60),
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> Date {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_the_fixture_session_start() {
        // TARGET_INFO_SESSION_START_TIME of the H200 export: utcTime 2026-11-21T23:56:36.
        assert_eq!(rfc3339_utc(1795305396652762130), "2026-11-21T23:56:36Z");
        assert_eq!(compact_utc(1795305396652762130), "20261121-235636");
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
    }
}
