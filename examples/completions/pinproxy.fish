function __pinproxy_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __pinproxy_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __pinproxy_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __pinproxy_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __pinproxy_parse_tokens -S
    set -l unparsed_tokens (__pinproxy_tokens -pc)
    switch $unparsed_tokens[1]
    case 'pinproxy'
        __pinproxy_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'run'
            __pinproxy_parse_subcommand 0 'config=' 'version' 'h/help'
        case 'check'
            __pinproxy_parse_subcommand 0 'config=' 'format=' 'horizon=' 'strict' 'version' 'h/help'
        case 'explain'
            __pinproxy_parse_subcommand 1 'config=' 'at=' 'connect' 'client=' 'version' 'h/help'
        case 'pin'
            __pinproxy_parse_subcommand -r 1 'connect=' 'servername=' 'ca-file=' 'format=' 'version' 'h/help'
        case 'pins'
            __pinproxy_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'suggest'
                __pinproxy_parse_subcommand 0 'admin=' 'config=' 'host=' 'indent=' 'version' 'h/help'
            end
        case 'ca'
            __pinproxy_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'init'
                __pinproxy_parse_subcommand 0 'config=' 'ca-cert=' 'ca-key=' 'ca-chain=' 'version' 'h/help'
            case 'show'
                __pinproxy_parse_subcommand 0 'config=' 'ca-cert=' 'ca-key=' 'ca-chain=' 'version' 'h/help'
            case 'export'
                __pinproxy_parse_subcommand 0 'config=' 'ca-cert=' 'ca-key=' 'ca-chain=' 'out=' 'version' 'h/help'
            case 'csr'
                __pinproxy_parse_subcommand 0 'config=' 'ca-cert=' 'ca-key=' 'ca-chain=' 'common-name=' 'organization=' 'out=' 'version' 'h/help'
            end
        case 'spotify'
            __pinproxy_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'login'
                __pinproxy_parse_subcommand 1 'config=' 'scope=' 'version' 'h/help'
            end
        case 'credentials'
            __pinproxy_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'login'
                __pinproxy_parse_subcommand 1 'config=' 'scope=' 'version' 'h/help'
            end
        case 'passwd'
            __pinproxy_parse_subcommand 0 'iterations=' 'version' 'h/help'
        case 'help'
            __pinproxy_parse_subcommand -r 1 'version'
        end
    end
end

function __pinproxy_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __pinproxy_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __pinproxy_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __pinproxy_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__pinproxy_tokens -p)
    if test -z "$(__pinproxy_tokens -t)"
        set -l index (count (__pinproxy_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'pinproxy' -f
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'run' -d 'Serve: the proxy listener, policy reload (SIGHUP, file watch), graceful shutdown.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'check' -d 'Validate the configuration and policy files without serving.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'explain' -d 'Say which policy a host matches, what it enforces and the answer a request would get.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'pin' -d 'Print the SPKI pin (sha256/BASE64) of certificates in PEM files or of a live server\'s chain.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'pins' -d 'Pins learned from the chains upstreams presented to a running pinproxy.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'ca' -d 'Create, show and export pinproxy\'s interception CA.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'spotify' -d 'Spotify sessions: authorise a refresh_token session.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'credentials' -d 'Credentials: authorise a refresh_token credential in a browser.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'passwd' -d 'Hash a client password for clients.identities (salted PBKDF2-SHA256).'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy run" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy run" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy run" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" format' -l 'format' -d 'Output format: text or json.' -rfka 'text json'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" horizon' -l 'horizon' -d 'How far ahead to warn about pin expiry: a duration (30d, 720h) or a number of days.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" strict' -l 'strict' -d 'Treat warnings as errors (a CI gate for the policy repository).'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy check" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" at' -l 'at' -d 'Judge pins at this instant (RFC 3339, or a date YYYY-MM-DD) instead of now.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" connect' -l 'connect' -d 'Also handshake with the upstream as the proxy would and print the verdict and the chain.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" client' -l 'client' -d 'Answer for this client: a configured identity\'s name or an IP address (docs/contract.md §15).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy explain" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" connect' -l 'connect' -d 'Handshake to HOST[:PORT] and print the pins of the chain it sends.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" servername' -l 'servername' -d 'SNI and hostname to verify (default: HOST).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" ca-file' -l 'ca-file' -d 'Verify against this PEM trust store instead of the system\'s.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" format' -l 'format' -d 'text (one line a certificate) or yaml (a spki_sha256 list to paste). Default: text for files, yaml for --connect.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pin" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy pins" -eq 1' -fa 'suggest' -d 'Print a ready spki_sha256 list per host from the chains a running pinproxy has seen.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" admin' -l 'admin' -d 'The admin API\'s base URL (default: from the config\'s admin.listen).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" config' -l 'config' -d 'The main config file whose admin.listen names the admin API (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" host' -l 'host' -d 'Only this upstream host name.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" indent' -l 'indent' -d 'Spaces before every line printed; 6 pastes it under the pins: of a policy in a hosts: list.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy pins suggest" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy ca" -eq 1' -fa 'init' -d 'Create the interception CA (ECDSA P-256, ten years, key mode 0600) if it does not exist.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy ca" -eq 1' -fa 'show' -d 'Print the CA\'s subject, issuer, SHA-256 fingerprint, validity and pin, and those of each certificate of its chain (reads only certificates).'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy ca" -eq 1' -fa 'export' -d 'Write the CA certificate (PEM) for clients to trust.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy ca" -eq 1' -fa 'csr' -d 'Write a certificate signing request (PEM) for the CA key, for an organisation\'s CA to sign as an intermediate; creates the key (mode 0600) if there is none.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" ca-cert' -l 'ca-cert' -d 'The CA certificate (overrides the config\'s ca.cert).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" ca-key' -l 'ca-key' -d 'The CA private key (overrides the config\'s ca.key).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" ca-chain' -l 'ca-chain' -d 'The certificates above the CA certificate (overrides the config\'s ca.chain).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca init" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" ca-cert' -l 'ca-cert' -d 'The CA certificate (overrides the config\'s ca.cert).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" ca-key' -l 'ca-key' -d 'The CA private key (overrides the config\'s ca.key).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" ca-chain' -l 'ca-chain' -d 'The certificates above the CA certificate (overrides the config\'s ca.chain).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca show" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" ca-cert' -l 'ca-cert' -d 'The CA certificate (overrides the config\'s ca.cert).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" ca-key' -l 'ca-key' -d 'The CA private key (overrides the config\'s ca.key).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" ca-chain' -l 'ca-chain' -d 'The certificates above the CA certificate (overrides the config\'s ca.chain).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" out' -l 'out' -d 'Write to this file instead of standard output.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca export" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" ca-cert' -l 'ca-cert' -d 'The CA certificate (overrides the config\'s ca.cert).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" ca-key' -l 'ca-key' -d 'The CA private key (overrides the config\'s ca.key).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" ca-chain' -l 'ca-chain' -d 'The certificates above the CA certificate (overrides the config\'s ca.chain).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" common-name' -l 'common-name' -d 'The request\'s CN (default: pinproxy interception CA <8 hex digits of the key>).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" organization' -l 'organization' -d 'The request\'s O.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" out' -l 'out' -d 'Write to this file instead of standard output.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy ca csr" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy spotify" -eq 1' -fa 'login' -d 'Authorise a refresh_token session in a browser and store its refresh token (an alias of `credentials login`).'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify login" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify login" scope' -l 'scope' -d 'The scopes to ask for, space-separated.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify login" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy spotify login" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_positional "pinproxy credentials" -eq 1' -fa 'login' -d 'Authorise a refresh_token credential in a browser (PKCE) and store its refresh token.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials login" config' -l 'config' -d 'The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials login" scope' -l 'scope' -d 'The scopes to ask for, space-separated (default: the credential\'s scope; Spotify\'s: user-read-private user-read-email).' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials login" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy credentials login" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy passwd" iterations' -l 'iterations' -d 'PBKDF2 iterations.' -rfka ''
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy passwd" version' -l 'version' -d 'Show the version.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy passwd" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'pinproxy' -n '__pinproxy_should_offer_completions_for_flags_or_options "pinproxy help" version' -l 'version' -d 'Show the version.'
