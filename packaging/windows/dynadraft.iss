; Inno Setup 6 script for DynaDraft on Windows (x64): installs the PyInstaller one-folder bundle dist\dynadraft\.
;
; Build (on Windows, after the bundle):  powershell -File packaging\windows\build-windows.ps1
; or by hand, from the repository root:
;   pyinstaller --noconfirm --distpath dist --workpath build\pyinstaller packaging\dynadraft.spec
;   "%ProgramFiles(x86)%\Inno Setup 6\ISCC.exe" /DAppVersion=<version from pyproject.toml> packaging\windows\dynadraft.iss
; Output: dist\DynaDraft-<version>-win-x64-setup.exe
;
; The version below is the default when ISCC is run without /DAppVersion; it is kept equal to pyproject.toml's
; (packaging/meta.py sync rewrites it; tests/packaging checks it).

#define AppName "DynaDraft"
#define ExeName "dynadraft"
#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define Publisher "DynaDraft contributors"
#define RepoRoot AddBackslash(SourcePath) + "..\.."
#define BundleDir RepoRoot + "\dist\dynadraft"

[Setup]
; A fixed GUID: installing a newer version replaces the old one in place. Never change it (packaging/meta.py).
AppId={{8F3B2C1D-5E6A-4B7C-9D8E-2A1F0C3B4D5E}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher={#Publisher}
VersionInfoVersion={#AppVersion}
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
; Per-user install by default (no admin prompt); the dialog offers "install for all users" too.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#RepoRoot}\dist
OutputBaseFilename={#AppName}-{#AppVersion}-win-x64-setup
SetupIconFile={#RepoRoot}\resources\icons\dynadraft.ico
UninstallDisplayIcon={app}\{#ExeName}.exe
; The bundle is ~300 MB with the demo model; lzma2 in solid mode gets it to roughly a third.
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
; User data (models, chats, calibration) lives in %LOCALAPPDATA%\DynaDraft and is not removed on uninstall.

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add the dynadraft command to PATH (for the terminal)"; GroupDescription: "Command line:"; Flags: unchecked

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
; The windowed twin (dynadraftw.exe) starts the app without a console window; dynadraft.exe is the command line.
Name: "{group}\{#AppName}"; Filename: "{app}\{#ExeName}w.exe"; IconFilename: "{app}\{#ExeName}.exe"
Name: "{group}\{#AppName} self-test"; Filename: "{cmd}"; Parameters: "/k ""{app}\{#ExeName}.exe"" --self-test"
Name: "{group}\{cm:UninstallProgram,{#AppName}}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#ExeName}w.exe"; IconFilename: "{app}\{#ExeName}.exe"; Tasks: desktopicon

[Registry]
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\{#ExeName}w.exe"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Path: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Path) then
  begin
    Result := True;
    exit;
  end;
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Path) + ';') = 0;
end;
