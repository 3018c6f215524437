//! BMC addresses as users write them: parse, and what we print parses back the same.

use ferrometal_bmc::BmcAddress;

/// One input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match BmcAddress::parse(text) {
        Ok(address) => {
            let shown = address.to_string();
            let again = BmcAddress::parse(&shown)
                .unwrap_or_else(|e| panic!("{text:?} prints as {shown:?}, which fails: {e}"));
            assert_eq!(again.to_string(), shown, "{text:?}");
            let _ = (address.base_url(), address.authority());
        }
        Err(e) => {
            // Errors name the input, cut: a huge address must not make a huge condition.
            let message = e.to_string();
            assert!(
                message.len() < 5000,
                "{} bytes: {message:.300}",
                message.len()
            );
        }
    }
}
