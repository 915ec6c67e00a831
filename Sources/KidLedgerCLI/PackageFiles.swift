import KidLedgerDaemon

/// The files the Debian package installs that are made from the program itself
/// (`kidledger-package`, run by Scripts/package.sh): the man page from every command's own help,
/// bash completion from the same command table, and the systemd user unit. One source, so the
/// package never describes commands the binary does not have.
public enum PackageFiles {
    /// The version (``CLI/version``; Scripts/package.sh reads it from here too).
    public static var version: String { CLI.version }

    /// kidledger(1) in roff (man(7)), dated `date` (YYYY-MM-DD).
    public static func manPage(date: String) -> String {
        var page = """
        .TH KIDLEDGER 1 "\(date)" "kidledger \(CLI.version)" "User Commands"
        .SH NAME
        kidledger \\- a local\\-first family allowance ledger, synced between the household's laptops
        .SH SYNOPSIS
        .B kidledger
        [\\fB\\-\\-home\\fR \\fIDIR\\fR] [\\fB\\-\\-json\\fR] [\\fB\\-\\-utc\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]
        .br
        .B kidledger open
        .SH DESCRIPTION
        kidledger keeps each child's allowance balance and history on every laptop of the household and syncs
        them directly between the laptops, with no server. "Kid Ledger" in the applications menu runs
        \\fBkidledger open\\fR, which starts this user's service and opens the family page in the browser.
        The commands below are the same ones the page runs.

        """
        page += "\n.SH COMMANDS\n"
        for command in CLI.commands {
            let spec = command.spec
            page += ".SS \"" + roff(spec.name + (spec.synopsis.isEmpty ? "" : " " + spec.synopsis)) + "\"\n"
            page += roff(spec.summary.prefix(1).uppercased() + spec.summary.dropFirst()) + ".\n"
            if !spec.details.isEmpty {
                page += ".PP\n.nf\n" + spec.details.split(separator: "\n", omittingEmptySubsequences: false).map { roff(String($0)) }.joined(separator: "\n") + "\n.fi\n"
            }
        }
        page += """
        .SH GLOBAL OPTIONS
        .nf
        \(ArgumentParser.globalOptionsHelp.split(separator: "\n").dropFirst().map { roff(String($0)) }.joined(separator: "\n"))
        .fi
        .SH NOTES
        .nf
        \(CLI.overview().components(separatedBy: "\n\n").dropFirst(3).joined(separator: "\n\n").split(separator: "\n", omittingEmptySubsequences: false).map { roff(String($0)) }.joined(separator: "\n"))
        .fi
        .SH FILES
        .TP
        .I ~/.kidledger
        the default home: the ledger, this device's keys and the page key (ui\\-token). Removing the package
        leaves it.
        .TP
        .I /usr/lib/systemd/user/kidledger.service
        the service \\fBkidledger open\\fR starts for the default home.
        .SH SEE ALSO
        .BR systemctl (1),
        .BR xdg\\-open (1)

        """
        return page
    }

    /// One line of text made safe for roff: backslashes and minus signs escaped, no line starting
    /// with a control character.
    static func roff(_ line: String) -> String {
        var text = line.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if text.hasPrefix(".") || text.hasPrefix("'") { text = "\\&" + text }
        return text
    }

    /// A bash completion script (bash-completion's completions folder) for every command and its options.
    public static func bashCompletion() -> String {
        let names = CLI.commands.map(\.spec.name) + ["help"]
        let firstWords = CLI.commandFirstWords
        var cases = ""
        for command in CLI.commands {
            let options = (command.spec.valueOptions + command.spec.flagOptions + ArgumentParser.globalValueOptions + ArgumentParser.globalFlags)
                .map { "--" + $0 }
            cases += "        \"\(command.spec.name)\") options=\"\(options.joined(separator: " "))\" ;;\n"
        }
        let valueOptions = CLI.valueOptionNames.sorted().map { "--" + $0 }.joined(separator: "|")
        let groups = Dictionary(grouping: names.filter { $0.contains(" ") }, by: { String($0.split(separator: " ")[0]) })
        var groupCases = ""
        for (group, members) in groups.sorted(by: { $0.key < $1.key }) {
            groupCases += "        \(group)) seconds=\"\(members.map { String($0.split(separator: " ")[1]) }.joined(separator: " "))\" ;;\n"
        }
        return """
        # bash completion for kidledger \(CLI.version); generated from kidledger's command table
        # (kidledger-package bash-completion). Do not edit.
        _kidledger() {
            local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
            local words=() i word skip=0
            # The command words typed so far (not options, not option values).
            for ((i = 1; i < COMP_CWORD; i++)); do
                word=${COMP_WORDS[i]}
                if ((skip)); then skip=0; continue; fi
                case "$word" in
                    \(valueOptions)) skip=1 ;;
                    --) break ;;
                    -*) ;;
                    *) words+=("$word") ;;
                esac
            done
            if [[ $prev == --home ]]; then
                COMPREPLY=($(compgen -d -- "$cur"))
                return
            fi
            local command="" options="" seconds=""
            if ((${#words[@]} >= 2)); then
                case "${words[0]} ${words[1]}" in
        \(CLI.commands.filter { $0.spec.name.contains(" ") }.map { "        \"\($0.spec.name)\") command=\"\($0.spec.name)\" ;;" }.joined(separator: "\n"))
                esac
            fi
            if [[ -z $command ]] && ((${#words[@]} >= 1)); then
                case "${words[0]}" in
        \(CLI.commands.filter { !$0.spec.name.contains(" ") }.map { "        \"\($0.spec.name)\") command=\"\($0.spec.name)\" ;;" }.joined(separator: "\n"))
                esac
            fi
            if [[ -n $command ]]; then
                case "$command" in
        \(cases)        esac
                if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$options" -- "$cur")); fi
                return
            fi
            if ((${#words[@]} == 0)); then
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "\(CLI.topLevelOptions.joined(separator: " "))" -- "$cur"))
                else
                    COMPREPLY=($(compgen -W "\(firstWords.joined(separator: " "))" -- "$cur"))
                fi
            elif ((${#words[@]} == 1)); then
                case "${words[0]}" in
        \(groupCases)        help) seconds="\(firstWords.filter { $0 != "help" }.joined(separator: " "))" ;;
                esac
                COMPREPLY=($(compgen -W "$seconds" -- "$cur"))
            fi
        }
        complete -F _kidledger kidledger

        """
    }

    /// The systemd user unit for /usr/lib/systemd/user/kidledger.service, running `binary`.
    public static func userUnit(binary: String = "/usr/bin/kidledger") -> String {
        ServiceUnit.packaged(binary: binary)
    }
}
