# Sphinx configuration of the collection's documentation site (built by docs/sphinx/build.sh).
# No network: intersphinx is off, so references to other collections' docs stay plain text.

project = 'inferops.vllm_dr'
copyright = 'inferops SRE'  # pylint: disable=redefined-builtin

title = 'inferops.vllm_dr: vLLM disaster recovery'
html_short_title = 'inferops.vllm_dr'
html_title = 'inferops.vllm_dr documentation'

extensions = ['sphinx_antsibull_ext']

pygments_style = 'ansible'
highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
html_theme_options = {
    'collapse_navigation': False,
    'analytics_id': '',
    'style_nav_header_background': '#5bbdbf',
    'style_external_links': True,
    'vcs_pageview_mode': 'edit',
    'navigation_depth': 3,
    'topbar_links': {
        'Source': 'https://github.com/inferops/vllm_dr',
        'Issues': 'https://github.com/inferops/vllm_dr/issues',
    },
    'documentation_home_url': 'index.html',
    'show_rtd_ethical_ads': False,
}
display_version = False

html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = 'any'
nitpicky = True
