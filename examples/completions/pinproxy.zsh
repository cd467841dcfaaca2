#compdef pinproxy

__pinproxy_complete() {
    local -ar non_empty_completions=("${@:#(|:*)}")
    local -ar empty_completions=("${(M)@:#(|:*)}")
    _describe -V '' non_empty_completions -- empty_completions -P $'\'\''
}

__pinproxy_custom_complete() {
    local -a completions
    completions=("${(@f)"$("${command_name}" "${@}" "${command_line[@]}")"}")
    if [[ "${#completions[@]}" -gt 1 ]]; then
        __pinproxy_complete "${completions[@]:0:-1}"
    fi
}

__pinproxy_cursor_index_in_current_word() {
    if [[ -z "${QIPREFIX}${IPREFIX}${PREFIX}" ]]; then
        printf 0
    else
        printf %s "${#${(z)LBUFFER}[-1]}"
    fi
}

_pinproxy() {
    emulate -RL zsh -G
    setopt extendedglob nullglob numericglobsort
    unsetopt aliases banghist

    local -xr SAP_SHELL=zsh
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(builtin emulate zsh -c 'printf %s "${ZSH_VERSION}"')"
    local -r SAP_SHELL_VERSION

    local context state state_descr line
    local -A opt_args

    local -r command_name="${words[1]}"
    local -ar command_line=("${words[@]}")
    local -ir current_word_index="$((CURRENT - 1))"

    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'run:Serve: the proxy listener, policy reload (SIGHUP, file watch), graceful shutdown.'
            'check:Validate the configuration and policy files without serving.'
            'explain:Say which policy a host matches, what it enforces and the answer a request would get.'
            'pin:Print the SPKI pin (sha256/BASE64) of certificates in PEM files or of a live server'\''s chain.'
            'pins:Pins learned from the chains upstreams presented to a running pinproxy.'
            'ca:Create, show and export pinproxy'\''s interception CA.'
            'spotify:Spotify sessions: authorise a refresh_token session.'
            'credentials:Credentials: authorise a refresh_token credential in a browser.'
            'passwd:Hash a client password for clients.identities (salted PBKDF2-SHA256).'
            'help:Show subcommand help information.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        run|check|explain|pin|pins|ca|spotify|credentials|passwd|help)
            "_pinproxy_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_pinproxy_run() {
    local -i ret=1
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_check() {
    local -i ret=1
    local -ar ___format=('text' 'json')
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--format[Output format\: text or json.]:format:{__pinproxy_complete "${___format[@]}"}'
        '--horizon[How far ahead to warn about pin expiry\: a duration (30d, 720h) or a number of days.]:horizon:'
        '--strict[Treat warnings as errors (a CI gate for the policy repository).]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_explain() {
    local -i ret=1
    local -ar arg_specs=(
        ':target:'
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--at[Judge pins at this instant (RFC 3339, or a date YYYY-MM-DD) instead of now.]:at:'
        '--connect[Also handshake with the upstream as the proxy would and print the verdict and the chain.]'
        '--client[Answer for this client\: a configured identity'\''s name or an IP address (docs/contract.md §15).]:client:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_pin() {
    local -i ret=1
    local -ar arg_specs=(
        '*:files:'
        '--connect[Handshake to HOST\[\:PORT\] and print the pins of the chain it sends.]:connect:'
        '--servername[SNI and hostname to verify (default\: HOST).]:servername:'
        '--ca-file[Verify against this PEM trust store instead of the system'\''s.]:ca-file:'
        '--format[text (one line a certificate) or yaml (a spki_sha256 list to paste). Default\: text for files, yaml for --connect.]:format:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_pins() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'suggest:Print a ready spki_sha256 list per host from the chains a running pinproxy has seen.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        suggest)
            "_pinproxy_pins_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_pinproxy_pins_suggest() {
    local -i ret=1
    local -ar arg_specs=(
        '--admin[The admin API'\''s base URL (default\: from the config'\''s admin.listen).]:admin:'
        '--config[The main config file whose admin.listen names the admin API (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--host[Only this upstream host name.]:host:'
        '--indent[Spaces before every line printed; 6 pastes it under the pins\: of a policy in a hosts\: list.]:indent:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_ca() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'init:Create the interception CA (ECDSA P-256, ten years, key mode 0600) if it does not exist.'
            'show:Print the CA'\''s subject, issuer, SHA-256 fingerprint, validity and pin, and those of each certificate of its chain (reads only certificates).'
            'export:Write the CA certificate (PEM) for clients to trust.'
            'csr:Write a certificate signing request (PEM) for the CA key, for an organisation'\''s CA to sign as an intermediate; creates the key (mode 0600) if there is none.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        init|show|export|csr)
            "_pinproxy_ca_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_pinproxy_ca_init() {
    local -i ret=1
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--ca-cert[The CA certificate (overrides the config'\''s ca.cert).]:ca-cert:'
        '--ca-key[The CA private key (overrides the config'\''s ca.key).]:ca-key:'
        '--ca-chain[The certificates above the CA certificate (overrides the config'\''s ca.chain).]:ca-chain:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_ca_show() {
    local -i ret=1
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--ca-cert[The CA certificate (overrides the config'\''s ca.cert).]:ca-cert:'
        '--ca-key[The CA private key (overrides the config'\''s ca.key).]:ca-key:'
        '--ca-chain[The certificates above the CA certificate (overrides the config'\''s ca.chain).]:ca-chain:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_ca_export() {
    local -i ret=1
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--ca-cert[The CA certificate (overrides the config'\''s ca.cert).]:ca-cert:'
        '--ca-key[The CA private key (overrides the config'\''s ca.key).]:ca-key:'
        '--ca-chain[The certificates above the CA certificate (overrides the config'\''s ca.chain).]:ca-chain:'
        '--out[Write to this file instead of standard output.]:out:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_ca_csr() {
    local -i ret=1
    local -ar arg_specs=(
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--ca-cert[The CA certificate (overrides the config'\''s ca.cert).]:ca-cert:'
        '--ca-key[The CA private key (overrides the config'\''s ca.key).]:ca-key:'
        '--ca-chain[The certificates above the CA certificate (overrides the config'\''s ca.chain).]:ca-chain:'
        '--common-name[The request'\''s CN (default\: pinproxy interception CA <8 hex digits of the key>).]:common-name:'
        '--organization[The request'\''s O.]:organization:'
        '--out[Write to this file instead of standard output.]:out:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_spotify() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'login:Authorise a refresh_token session in a browser and store its refresh token (an alias of `credentials login`).'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        login)
            "_pinproxy_spotify_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_pinproxy_spotify_login() {
    local -i ret=1
    local -ar arg_specs=(
        ':session:'
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--scope[The scopes to ask for, space-separated.]:scope:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_credentials() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'login:Authorise a refresh_token credential in a browser (PKCE) and store its refresh token.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        login)
            "_pinproxy_credentials_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_pinproxy_credentials_login() {
    local -i ret=1
    local -ar arg_specs=(
        ':name:'
        '--config[The main config file (default\: etc/pinproxy.yaml if present, else the embedded defaults).]:config:'
        '--scope[The scopes to ask for, space-separated (default\: the credential'\''s scope; Spotify'\''s\: user-read-private user-read-email).]:scope:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_passwd() {
    local -i ret=1
    local -ar arg_specs=(
        '--iterations[PBKDF2 iterations.]:iterations:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_pinproxy_help() {
    local -i ret=1
    local -ar arg_specs=(
        '*:subcommands:'
        '--version[Show the version.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

if [[ "${funcstack[1]}" = _pinproxy ]]; then
    _pinproxy "${@}"
else
    compdef _pinproxy pinproxy
fi
